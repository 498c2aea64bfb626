package agent_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/tools"
)

// spawnSchema is spawn_chick's parameters (pkg/mother/chicks.go) with two
// tiers, as Mother builds them.
const spawnSchema = `{"type":"object","properties":{
"label":{"type":"string","description":"a few words shown to users"},
"goal":{"type":"string","description":"the complete goal for the chick, with every detail it needs: it does not see this conversation"},
"tier":{"type":"string","enum":["big","small"],"description":"model tier (default small)"},
"skills":{"type":"string","enum":["channel","workspace"],"description":"where skills the chick creates or changes under skills/ go: this channel's (default) or the workspace's, shared by every channel (only when an admin asks for it)"}},
"required":["goal"]}`

// listEventsSchema is list_events' parameters (pkg/events/tools.go).
const listEventsSchema = `{"type":"object","properties":{}}`

// nestedSchema exercises nested objects and arrays, type lists, bounds
// and a closed object.
const nestedSchema = `{"type":"object","additionalProperties":false,"required":["items"],"properties":{
"items":{"type":"array","items":{"type":"object","required":["name"],"properties":{
  "name":{"type":"string","description":"what to buy"},
  "qty":{"type":"integer","minimum":1,"maximum":99}}}},
"note":{"type":["string","null"]},
"mode":{"type":"string","enum":["fast","careful"]},
"tags":{"type":"object","additionalProperties":{"type":"string"}}}}`

// mcpSchema is the kind of schema an MCP server sends: keywords CheckArgs
// does not know must not get in the way.
const mcpSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
"$defs":{"Kind":{"type":"string","enum":["a","b"]}},
"properties":{
  "kind":{"$ref":"#/$defs/Kind"},
  "when":{"type":"string","format":"date-time","pattern":"^[0-9]"},
  "id":{"anyOf":[{"type":"string"},{"type":"integer"}]},
  "opt":{"oneOf":[{"type":"null"},{"type":"boolean"}]},
  "count":{"type":"integer","nullable":true},
  "odd":{"type":"whatever"}},
"required":["kind"]}`

// toolSchemas returns the parameters of the chick's real tools by name.
func toolSchemas(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	ts, err := tools.Chick(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, tool := range ts {
		s := tool.Spec()
		out[s.Name] = s.Parameters
	}
	for _, name := range []string{"bash", "read", "write", "edit", "attach"} {
		if out[name] == nil {
			t.Fatalf("no %s tool", name)
		}
	}
	return out
}

func TestCheckArgsAccepts(t *testing.T) {
	ts := toolSchemas(t)
	for _, tc := range []struct {
		name, schema, args string
		fixed              string // "" means: the input, byte for byte
	}{
		{"bash", string(ts["bash"]), `{"label":"List","command":"ls -la","timeout":30}`, ""},
		// Tolerated, as the tools take them: a number written as a
		// string, and null for an optional field (kept as sent).
		{"integer as string", string(ts["bash"]), `{"label":"l","command":"ls","timeout":"30"}`, ""},
		{"null optional", string(ts["read"]), `{"label":"l","path":"a","limit":null}`, ""},
		{"spacing kept", string(ts["read"]), " {\n  \"label\": \"Read\", \"path\": \"a.go\", \"offset\": 3.0 }\n", ""},
		{"read integer exponent", string(ts["read"]), `{"label":"l","path":"a","limit":1e2}`, ""},
		{"write", string(ts["write"]), `{"label":"l","path":"a","content":""}`, ""},
		{"edit", string(ts["edit"]), `{"label":"l","path":"a","oldText":"x","newText":"y"}`, ""},
		{"attach", string(ts["attach"]), `{"label":"l","path":"a","title":"T"}`, ""},
		{"spawn", spawnSchema, `{"goal":"build it","tier":"big","skills":"workspace"}`, ""},
		{"unknown fields open", spawnSchema, `{"goal":"x","extra":[1,2],"label":"y"}`, ""},
		{"list_events empty", listEventsSchema, `{}`, ""},
		{"list_events extra", listEventsSchema, `{"channel":"x"}`, ""},
		{"nil args", listEventsSchema, "", "{}"},
		{"blank args", listEventsSchema, " \n", "{}"},
		{"null args", listEventsSchema, "null", "{}"},
		{"empty string", listEventsSchema, `""`, "{}"},
		{"string null", listEventsSchema, `"null"`, "{}"},
		{"string object", spawnSchema, `"{\"goal\": \"x\"}"`, `{"goal": "x"}`},
		{"string object spaced", spawnSchema, ` " {\"goal\": \"x\"} " `, `{"goal": "x"}`},
		{"double string", spawnSchema, `"\"{\\\"goal\\\": \\\"x\\\"}\""`, `{"goal": "x"}`},
		{"nested", nestedSchema, `{"items":[{"name":"milk","qty":2},{"name":"eggs"}],"note":null,"tags":{"a":"b"}}`, ""},
		{"nested bounds", nestedSchema, `{"items":[{"name":"a","qty":1},{"name":"b","qty":99}]}`, ""},
		{"mcp", mcpSchema, `{"kind":"zzz","when":"x","id":[],"opt":"no","count":null,"odd":{}}`, ""},
		{"mcp count", mcpSchema, `{"kind":"a","count":4}`, ""},
		{"empty schema", ``, `{"a":1}`, ""},
		{"null schema", `null`, `{"a":1}`, ""},
		{"broken schema", `{"type":"object","properties":`, `{"a":1}`, ""},
		{"schema not an object", `[1,2]`, `{"a":1}`, ""},
		{"malformed keywords", `{"type":7,"properties":[],"required":"a","enum":{},"items":3,"minimum":"x","additionalProperties":"no"}`, `{"b":2}`, ""},
		{"root type ignored", `{"type":"string","properties":{"a":{"type":"integer"}}}`, `{"a":1}`, ""},
		{"enum number", `{"properties":{"n":{"enum":[1,"two",null,{"k":[true]}]}}}`, `{"n":1.0}`, ""},
		{"enum object", `{"properties":{"n":{"enum":[1,"two",null,{"k":[true]}]}}}`, `{"n":{"k":[true]}}`, ""},
		{"enum null", `{"properties":{"n":{"enum":[1,"two",null]}}}`, `{"n":null}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fixed, problem := agent.CheckArgs(json.RawMessage(tc.schema), json.RawMessage(tc.args))
			if problem != "" {
				t.Fatalf("CheckArgs(%s) = problem\n%s", tc.args, problem)
			}
			want := tc.fixed
			if want == "" {
				want = tc.args
			}
			if string(fixed) != want {
				t.Fatalf("fixed = %q, want %q", fixed, want)
			}
		})
	}
}

func TestCheckArgsProblems(t *testing.T) {
	ts := toolSchemas(t)
	spawnShape := `expected: {"goal": string (required), "label": string, "tier": "big"|"small", "skills": "channel"|"workspace"}`
	for _, tc := range []struct {
		name, schema, args string
		want               []string // each must appear in the message
		lines              int      // problem lines before "expected:" (0: not checked)
	}{
		// Empty and missing.
		{"empty, spawn", spawnSchema, ``, []string{
			`missing required field "goal" (string: the complete goal for the chick, with every detail it…)`, spawnShape}, 1},
		{"empty, bash", string(ts["bash"]), `null`, []string{
			`missing required field "label" (string: A few words shown to the user while this runs, e.g.…)`,
			`missing required field "command" (string: The command line, run with the working directory at the…)`,
			`expected: {"label": string (required), "command": string (required), "timeout": integer}`}, 2},
		{"misspelt required", string(ts["bash"]), `{"label":"l","comand":"ls"}`, []string{
			`missing required field "command" (string: The command line`, `; you sent "comand": rename it to "command"`}, 1},
		{"wrong case", spawnSchema, `{"Goal":"x"}`, []string{`missing required field "goal"`, `you sent "Goal": rename it to "goal"`}, 1},
		{"snake case", string(ts["edit"]), `{"label":"l","path":"a","old_text":"x","newText":"y"}`, []string{
			`missing required field "oldText" (string: The exact text to replace; it must occur exactly once)`, `you sent "old_text": rename it to "oldText"`}, 1},
		{"wrapped", spawnSchema, `{"name":"spawn_chick","arguments":{"goal":"x"}}`, []string{
			`the fields are wrapped in "arguments": put them at the top level`}, 1},

		// Types, enums, bounds.
		{"integer as a word", string(ts["bash"]), `{"label":"l","command":"ls","timeout":"soon"}`, []string{
			`field "timeout" must be an integer, got string "soon"`}, 1},
		{"fraction as string", string(ts["bash"]), `{"label":"l","command":"ls","timeout":"1.5"}`, []string{
			`field "timeout" must be an integer, got string "1.5"`}, 1},
		{"fraction", string(ts["read"]), `{"label":"l","path":"a","offset":1.5}`, []string{`field "offset" must be an integer, got number 1.5`}, 1},
		{"null required", string(ts["write"]), `{"label":"l","path":"a","content":null}`, []string{`field "content" must be a string, got null`}, 1},
		{"bool and object", string(ts["write"]), `{"label":true,"path":{"p":1},"content":["x"]}`, []string{
			`field "label" must be a string, got boolean true`, `field "path" must be a string, got an object`,
			`field "content" must be a string, got an array`}, 3},
		{"enums", spawnSchema, `{"goal":"x","tier":"medium","skills":"global"}`, []string{
			`field "tier" must be one of "big", "small", got string "medium"`,
			`field "skills" must be one of "channel", "workspace", got string "global"`, spawnShape}, 2},
		{"enum typo", spawnSchema, `{"goal":"x","tier":"Smal"}`, []string{`got string "Smal" (did you mean "small"?)`}, 1},
		{"enum wrong type", spawnSchema, `{"goal":"x","tier":2}`, []string{`field "tier" must be a string, got number 2`}, 1},
		{"long string clipped", spawnSchema, `{"goal":"x","tier":"` + strings.Repeat("abc ", 30) + `"}`, []string{`got string "abc abc abc abc abc abc abc abc abc abc…"`}, 1},
		{"nested paths", nestedSchema, `{"items":[{"name":"a"},{"qty":2},{"name":3,"qty":0},{"name":"b","qty":100,"colour":"red"}],"note":5}`, []string{
			`missing required field "items[1].name" (string: what to buy)`,
			`field "items[2].name" must be a string, got number 3`,
			`field "items[2].qty" must be at least 1, got 0`,
			`field "items[3].qty" must be at most 99, got 100`,
			`field "note" must be a string or null, got number 5`,
			`expected: {"items": array of {"name": string (required), "qty": integer} (required), "note": string|null, "mode": "fast"|"careful", "tags": object}`}, 5},
		{"array type", nestedSchema, `{"items":{"name":"a"}}`, []string{`field "items" must be an array, got an object`}, 1},
		{"additionalProperties schema", nestedSchema, `{"items":[],"tags":{"a":"b","c":1}}`, []string{`field "tags.c" must be a string, got number 1`}, 1},
		{"unknown closed", nestedSchema, `{"items":[],"mdoe":"fast","colour":"red"}`, []string{
			`unknown field "mdoe": did you mean "mode"?`, `unknown field "colour": remove it`}, 2},
		{"mcp required", mcpSchema, `{"knd":"a"}`, []string{`missing required field "kind"; you sent "knd": rename it to "kind"`,
			`expected: {"kind": any (required), "when": string, "id": any, "opt": any, "count": integer, "odd": any}`}, 1},
		{"nullable", mcpSchema, `{"kind":"a","count":"one"}`, []string{`field "count" must be an integer, got string "one"`}, 1},
		{"required outside properties", `{"required":["x"]}`, `{}`, []string{"missing required field \"x\"\n", `expected: {"x": any (required)}`}, 1},

		// Not an object.
		{"array", spawnSchema, `[{"goal":"x"}]`, []string{
			`arguments must be a JSON object with the tool's fields, got an array; send the object itself, not inside an array`, spawnShape}, 1},
		{"number", spawnSchema, `42`, []string{`arguments must be a JSON object with the tool's fields, got a number`}, 1},
		{"bool", spawnSchema, `true`, []string{`got a boolean`}, 1},
		{"string", spawnSchema, `"do the thing"`, []string{`arguments must be a JSON object, got a string "do the thing"`}, 1},
		{"string holding array", spawnSchema, `"[1]"`, []string{`arguments must be a JSON object, got a string holding an array`}, 1},
		{"string holding broken object", spawnSchema, `"{\"goal\": \"x\",}"`, []string{
			`arguments must be a JSON object, not a string; the string's content is not valid JSON either: remove the trailing comma after "goal": "x"`}, 1},
		{"repaired string still wrong", spawnSchema, `"{\"tier\": \"big\"}"`, []string{
			`send the arguments as a JSON object, not as a string holding one`, `missing required field "goal"`}, 2},
		{"invalid schema", `nope`, `[]`, []string{"got an array\nexpected: a JSON object"}, 1},
		{"list_events", listEventsSchema, `"x"`, []string{"expected: {}"}, 1},

		// Not JSON.
		{"trailing comma", spawnSchema, `{"goal":"x","label":"Looking",}`, []string{
			`arguments are not valid JSON: remove the trailing comma after "label":"Looking" (offset 29)`, spawnShape}, 1},
		{"trailing comma array", nestedSchema, `{"items":[{"name":"a"}, {"name":"b"},]}`, []string{
			`remove the trailing comma after {"name":"b"} (offset 36)`}, 1},
		{"trailing comma long", spawnSchema, `{"goal": "` + strings.Repeat("word ", 20) + `", }`, []string{
			`remove the trailing comma after "goal": "word word word word word word…`}, 1},
		{"single quotes", spawnSchema, `{'goal': 'x'}`, []string{"use double quotes for keys and strings, not single quotes (offset 1, near `{'goal': 'x'}`)"}, 1},
		{"single quoted value", spawnSchema, `{"goal": 'x'}`, []string{"use double quotes", "offset 9"}, 1},
		{"unquoted key", spawnSchema, `{goal: "x"}`, []string{`put the key goal in double quotes: "goal"`}, 1},
		{"unquoted second key", spawnSchema, `{"goal": "x", tier: "big"}`, []string{`put the key tier in double quotes: "tier" (offset 14`}, 1},
		{"python True", `{}`, `{"a": True}`, []string{"use JSON's true, false and null (lowercase), not Python's True (offset 6, near `{\"a\": True}`)"}, 1},
		{"python False", `{}`, `{"a": [False]}`, []string{"not Python's False"}, 1},
		{"python None", `{}`, `{"a": None}`, []string{"not Python's None"}, 1},
		{"NaN", `{}`, `{"a": NaN}`, []string{"NaN is not JSON: use null or a number"}, 1},
		{"bare string", `{}`, `{"path": notes.txt}`, []string{`put the string value in double quotes: "notes.txt", not notes.txt`}, 1},
		{"bare string like a literal", `{}`, `{"path": foo}`, []string{`put the string value in double quotes: "foo", not foo`}, 1},
		{"truncated", spawnSchema, `{"goal": "x", "tier": "sm`, []string{
			`arguments are not valid JSON: they end too early (cut off?): the last string is not closed and the closing "}" is missing. Send the complete object`}, 1},
		{"truncated nested", nestedSchema, `{"items": [{"name": "a"}, {"name": "b"`, []string{`the closing "}]}" is missing`}, 1},
		{"truncated after colon", spawnSchema, `{"goal":`, []string{`the field "goal" has no value and the closing "}" is missing`}, 1},
		{"just a brace", spawnSchema, `{`, []string{`they end too early (cut off?): the closing "}" is missing`}, 1},
		{"line break in string", spawnSchema, "{\"goal\": \"one\ntwo\"}", []string{`escape line breaks as \n inside a string (offset 13, near ` + "`" + `{"goal": "one\ntwo"}` + "`)"}, 1},
		{"tab in string", spawnSchema, "{\"goal\": \"a\tb\"}", []string{`escape tabs as \t inside a string`}, 1},
		{"bad escape", spawnSchema, `{"goal": "it\'s"}`, []string{`\' is not a JSON escape`, `(write ' without the backslash)`}, 1},
		{"missing comma", spawnSchema, `{"goal": "a" "tier": "big"}`, []string{`expected "," or "}" here: add the missing comma`, "offset 13"}, 1},
		{"unescaped quote", spawnSchema, `{"goal": "say "hi" now"}`, []string{`escape a double quote inside the string before it as \"`}, 1},
		{"missing colon", spawnSchema, `{"goal" "x"}`, []string{`put a colon after the key "goal" (offset 8`}, 1},
		{"missing value", spawnSchema, `{"goal": }`, []string{`the field "goal" has no value: give it one or leave the field out`}, 1},
		{"comment", spawnSchema, "{\"goal\": \"x\" // the goal\n}", []string{"JSON has no comments: remove them"}, 1},
		{"two objects", spawnSchema, `{"goal":"x"}{"goal":"y"}`, []string{"extra text after the JSON object: send exactly one object (offset 12"}, 1},
		{"form feed is not JSON space", listEventsSchema, "{}\f", []string{"extra text after the JSON object"}, 1},
		{"plain text", spawnSchema, `ls -la`, []string{"arguments are not valid JSON: they must be a JSON object starting with {, got `ls -la`"}, 1},
		{"quoted in single quotes", spawnSchema, `'{"goal":"x"}'`, []string{"they must be a JSON object starting with {"}, 1},
		{"other syntax error", spawnSchema, `{"goal": 01}`, []string{"arguments are not valid JSON: invalid character '1'", "(offset 10, near `{\"goal\": 01}`)"}, 1},
		{"excerpt clipped", `{}`, `{"a": "` + strings.Repeat("x", 50) + `", "b": True, "c": "` + strings.Repeat("y", 50) + `"}`, []string{
			"near `…xxxxxxxxxxxxxxxx\", \"b\": True, \"c\": \"yyyy…`)"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fixed, problem := agent.CheckArgs(json.RawMessage(tc.schema), json.RawMessage(tc.args))
			t.Logf("%s\n-> %s", tc.args, problem)
			if problem == "" {
				t.Fatalf("CheckArgs(%s) accepted it", tc.args)
			}
			if string(fixed) != tc.args {
				t.Errorf("fixed = %q, want the input %q", fixed, tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(problem, w) {
					t.Errorf("message lacks %q:\n%s", w, problem)
				}
			}
			lines := strings.Split(problem, "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "expected: ") {
				t.Errorf("last line %q is not the expected shape", last)
			}
			if tc.lines > 0 && len(lines)-1 != tc.lines {
				t.Errorf("%d problem lines, want %d:\n%s", len(lines)-1, tc.lines, problem)
			}
		})
	}
}

// TestCheckArgsManyProblems: past five problems the rest are counted.
func TestCheckArgsManyProblems(t *testing.T) {
	args := `{"items":[{"qty":1},{"qty":2},{"qty":3},{"qty":4},{"qty":5},{"qty":6},{"qty":7}]}`
	_, problem := agent.CheckArgs(json.RawMessage(nestedSchema), json.RawMessage(args))
	lines := strings.Split(problem, "\n")
	if len(lines) != 7 || lines[5] != "(and 2 more problems like these)" || !strings.HasPrefix(lines[6], "expected: ") {
		t.Fatalf("message:\n%s", problem)
	}
	if lines[4] != `missing required field "items[4].name" (string: what to buy)` {
		t.Errorf("fifth line %q", lines[4])
	}
}

// TestCheckArgsToolSpecs runs every real tool's schema through empty and
// valid arguments.
func TestCheckArgsToolSpecs(t *testing.T) {
	specs := map[string]json.RawMessage{
		"spawn_chick": json.RawMessage(spawnSchema),
		"list_events": json.RawMessage(listEventsSchema),
	}
	for name, s := range toolSchemas(t) {
		specs[name] = s
	}
	for name, schema := range specs {
		var spec struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		if err := json.Unmarshal(schema, &spec); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, problem := agent.CheckArgs(schema, nil)
		for _, r := range spec.Required {
			if !strings.Contains(problem, `missing required field "`+r+`" (string: `) {
				t.Errorf("%s: empty arguments: no line for %q:\n%s", name, r, problem)
			}
		}
		if len(spec.Required) == 0 && problem != "" {
			t.Errorf("%s: empty arguments rejected:\n%s", name, problem)
		}
		// Every required field as a string is enough for these tools.
		valid := map[string]string{}
		for _, r := range spec.Required {
			valid[r] = "x"
		}
		args, _ := json.Marshal(valid)
		if fixed, problem := agent.CheckArgs(schema, args); problem != "" || !bytes.Equal(fixed, args) {
			t.Errorf("%s: %s: fixed %s, problem %q", name, args, fixed, problem)
		}
	}
}

func TestNearestName(t *testing.T) {
	names := []string{"label", "command", "timeout", "oldText", "newText", "path", "id"}
	for _, tc := range []struct{ name, want string }{
		{"comand", "command"},
		{"Command", "command"},
		{"COMMAND", "command"},
		{"timout", "timeout"},
		{"time_out", "timeout"},
		{"old_text", "oldText"},
		{"oldtext", "oldText"},
		{"new_text", "newText"},
		{"lable", "label"},
		{"paht", "path"},
		{"pth", "path"},
		{"ID", "id"},
		{"cmd", ""},     // an abbreviation, not a typo
		{"ip", "id"},    // one letter of two changed
		{"up", ""},      // both letters changed
		{"x", ""},       // too short to guess
		{"", ""},        // nothing to match
		{"content", ""}, // a different word
		{"description", ""},
	} {
		if got := agent.NearestName(tc.name, names); got != tc.want {
			t.Errorf("NearestName(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := agent.NearestName("a", nil); got != "" {
		t.Errorf("no names: %q", got)
	}
	// Ties go to the earlier name.
	if got := agent.NearestName("cat", []string{"bat", "car"}); got != "bat" {
		t.Errorf("tie: %q", got)
	}
}

// FuzzCheckArgs: CheckArgs never panics; accepted arguments are a JSON
// object, the input itself when it was one; a problem ends with the
// expected shape and leaves the input alone. The seeds run in every go
// test; go test -fuzz=FuzzCheckArgs explores further.
func FuzzCheckArgs(f *testing.F) {
	schemas := []string{"", "null", "{", listEventsSchema, spawnSchema, nestedSchema, mcpSchema,
		`{"type":"object","properties":{"label":{"type":"string"},"command":{"type":"string"},"timeout":{"type":"integer"}},"required":["label","command"]}`}
	args := []string{``, `null`, `{}`, `[]`, `"x"`, `"{\"goal\":\"x\"}"`, `"\"{}\""`, `""`, `{"goal":"x"}`,
		`{"goal":"x",}`, `{'goal':'x'}`, `{goal:1}`, `{"a":True}`, `{"a":[1,2`, "{\"a\":\"b\nc\"}", `{"a":"\'"}`,
		`{"items":[{"name":1,"qty":0.5}],"x":{}}`, `{"label":"l","command":"ls","timeout":"30"}`, `1e999`,
		`{"a":1}{"b":2}`, `{"a" 1}`, `{"a":}`, "{\"\xff\":\"\xfe\"}", `{"tier":"Smal","skills":null}`, `[[[[[`}
	for i, a := range args {
		f.Add(schemas[i%len(schemas)], a)
	}
	f.Fuzz(func(t *testing.T, schema, args string) {
		fixed, problem := agent.CheckArgs(json.RawMessage(schema), json.RawMessage(args))
		if problem != "" {
			if string(fixed) != args {
				t.Fatalf("problem, but fixed %q is not the input %q", fixed, args)
			}
			lines := strings.Split(problem, "\n")
			if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-1], "expected: ") {
				t.Fatalf("message without an expected line:\n%s", problem)
			}
			return
		}
		trimmed := bytes.Trim(fixed, " \t\r\n")
		if !json.Valid(fixed) || len(trimmed) == 0 || trimmed[0] != '{' {
			t.Fatalf("accepted %q as %q, not a JSON object", args, fixed)
		}
		in := bytes.Trim([]byte(args), " \t\r\n")
		if len(in) > 0 && in[0] == '{' && string(fixed) != args {
			t.Fatalf("an object was changed: %q -> %q", args, fixed)
		}
	})
}
