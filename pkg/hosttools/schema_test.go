package hosttools

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/prompt"
)

func TestSummarise(t *testing.T) {
	schema := `{"type":"object","required":["to","subject"],"properties":{
"body":{"type":"string","description":"the text"},
"subject":{"type":"string"},
"to":{"type":"array","items":{"type":"string"},"description":"recipients"},
"priority":{"enum":["low","high"]},
"when":{"type":["string","null"]},
"meta":{"type":"object","properties":{"a":{"type":"string"}}},
"size":{"anyOf":[{"type":"integer"},{"type":"string"}]},
"mode":{"const":"draft"},
"grid":{"type":"array","items":{"type":"array","items":{"type":"number"}}},
"ref":{"$ref":"#/$defs/x"},
"anything":{}}}`
	got := summarise(json.RawMessage(schema))
	want := []prompt.HostToolParam{
		{Name: "to", Type: "string[]", Description: "recipients", Required: true},
		{Name: "subject", Type: "string", Required: true},
		{Name: "anything", Type: "any"},
		{Name: "body", Type: "string", Description: "the text"},
		{Name: "grid", Type: "number[][]"},
		{Name: "meta", Type: "object"},
		{Name: "mode", Type: `"draft"`},
		{Name: "priority", Type: `"low"|"high"`},
		{Name: "ref", Type: "object"},
		{Name: "size", Type: "integer|string"},
		{Name: "when", Type: "string"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("summarise =\n%+v\nwant\n%+v", got, want)
	}
	if got := summarise(json.RawMessage(`{"type":"object"}`)); got != nil {
		t.Errorf("summarise(no properties) = %+v", got)
	}
	if got := summarise(json.RawMessage(`not json`)); got != nil {
		t.Errorf("summarise(bad) = %+v", got)
	}
}

func TestCompileSchema(t *testing.T) {
	tests := []struct {
		name, schema, args, wantErr string
	}{
		{"2020-12 ok", `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`, `{"n":1}`, ""},
		{"2020-12 bad", `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`, `{"n":"x"}`, "integer"},
		{"draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"d":{"type":"string","maxLength":3}}}`, `{"d":"toolong"}`, "maxLength"},
		{"local ref", `{"type":"object","$defs":{"c":{"type":"string","enum":["red","blue"]}},"properties":{"c":{"$ref":"#/$defs/c"}}}`, `{"c":"green"}`, "enum"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := compileSchema(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatalf("compileSchema: %v", err)
			}
			args, _ := decodeArgs(json.RawMessage(tc.args))
			err = r.Validate(args)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate(%s) = %v", tc.args, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate(%s) = %v, want an error about %s", tc.args, err, tc.wantErr)
			}
		})
	}
	// A schema this client cannot resolve: the tool is still callable, its
	// arguments unchecked here (the server checks them).
	if _, err := compileSchema(json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://example.com/x.json"}}}`)); err == nil {
		t.Error("a remote $ref resolved without a loader")
	}
	if _, err := compileSchema(nil); err == nil {
		t.Error("a missing schema compiled")
	}
}

func TestDecodeArgs(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{``, `{}`, ""},
		{`null`, `{}`, ""},
		{`{"a":1}`, `{"a":1}`, ""},
		{`"{\"a\":1}"`, `{"a":1}`, ""},
		{`""`, `{}`, ""},
		{`"hello"`, ``, "got a string"},
		{`[1]`, ``, "got an array"},
		{`3`, ``, "got a number"},
		{`{`, ``, "not valid JSON"},
	}
	for _, tc := range tests {
		got, err := decodeArgs(json.RawMessage(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("decodeArgs(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		b, _ := json.Marshal(got)
		if err != nil || string(b) != tc.want {
			t.Errorf("decodeArgs(%q) = %s, %v; want %s", tc.in, b, err, tc.want)
		}
	}
}

// FuzzToolSchema: whatever schema a server announces and whatever
// arguments a model sends, summarising, rendering, compiling and
// validating never panic, the prompt section stays in its budget, and the
// summary lists every property once, required ones first in the schema's
// order, then the optional ones by name.
func FuzzToolSchema(f *testing.F) {
	f.Add(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer","maximum":3}}}`, `{"n":4}`)
	f.Add(`{"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/x"}]}}},"$defs":{"x":{"enum":[1,"b",null]}}}`, `"{\"a\":[1]}"`)
	f.Add(`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"d":{"type":"string"}},"properties":{"d":{"$ref":"#/definitions/d"}}}`, `{"d":3}`)
	f.Add(`{"properties":{"x":{"items":{"items":{"items":{"items":{"type":"string"}}}}}}}`, `[]`)
	f.Add(`{"type":"object","required":["b","a"],"properties":{"a":{},"d":{"type":"string"},"b":{},"c":{"type":"integer"}}}`, `{"b":1}`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		params := summarise(json.RawMessage(schema))
		checkSummaryOrder(t, schema, params)
		tool := prompt.HostTool{Name: "s.t", Description: schema, Params: params}
		_ = tool.Details()
		for _, s := range prompt.Sections(prompt.Input{Workspace: t.TempDir(), HostTools: []prompt.HostTool{tool, tool}}) {
			if s.Title == "Host tools" && len([]rune(s.Body)) > prompt.BudgetHostTools {
				t.Fatalf("host tools section is %d characters", len([]rune(s.Body)))
			}
		}
		r, err := compileSchema(json.RawMessage(schema))
		if err != nil {
			return
		}
		if obj, err := decodeArgs(json.RawMessage(args)); err == nil {
			_ = r.Validate(obj)
		}
	})
}

// checkSummaryOrder asserts summarise's contract on the schema's
// top-level properties and required list.
func checkSummaryOrder(t *testing.T, schema string, params []prompt.HostToolParam) {
	t.Helper()
	var root struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal([]byte(schema), &root) != nil {
		return // summarise's own decoder may differ on broken input
	}
	if len(params) != len(root.Properties) {
		t.Fatalf("%d parameters for %d properties: %+v", len(params), len(root.Properties), params)
	}
	seen := map[string]bool{}
	var req, opt []string
	for _, p := range params {
		if _, ok := root.Properties[p.Name]; !ok || seen[p.Name] {
			t.Fatalf("parameter %q is not a property or is listed twice: %+v", p.Name, params)
		}
		seen[p.Name] = true
		if p.Required != slices.Contains(root.Required, p.Name) {
			t.Fatalf("parameter %q: required = %v, schema says otherwise", p.Name, p.Required)
		}
		if p.Required {
			if len(opt) > 0 {
				t.Fatalf("required %q after optional %v", p.Name, opt)
			}
			req = append(req, p.Name)
		} else {
			opt = append(opt, p.Name)
		}
	}
	for i := 1; i < len(req); i++ {
		if slices.Index(root.Required, req[i-1]) > slices.Index(root.Required, req[i]) {
			t.Fatalf("required parameters %v are not in the schema's order %v", req, root.Required)
		}
	}
	if !slices.IsSorted(opt) {
		t.Fatalf("optional parameters %v are not sorted by name", opt)
	}
}
