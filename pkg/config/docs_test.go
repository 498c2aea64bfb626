package config

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// configDoc is the page whose "Every field" table documents config.json.
const (
	configDoc     = "../../docs/configuration.md"
	configHeading = "## Every field"
	// sampleKey is the key of the one entry the test puts in every map of
	// objects (adapters, tiers, MCP servers) so their fields get defaults.
	sampleKey = "x"
)

// adapterSettings returns the settings type each chat adapter registers for
// itself, keyed by adapter type, as a fresh value. Their fields are
// documented under adapters.<name> next to the shared ones (type, admins,
// dm, quiet, quietChannels). The adapters register themselves: this test
// binary links them through adapters_test.go.
func adapterSettings() map[string]reflect.Value {
	out := map[string]reflect.Value{}
	for _, typ := range AdapterTypes() {
		spec, _ := LookupAdapter(typ)
		if spec.NewSettings != nil {
			out[typ] = reflect.ValueOf(spec.NewSettings())
		}
	}
	return out
}

// docRow is one row of the field table.
type docRow struct {
	path string // dotted path, placeholders normalised to <name>
	def  string // the Default cell as written
	line int
}

// configField is one field of config.Config found by walking its type.
type configField struct {
	path  string
	value reflect.Value // the value after SetDefaults
	// entry marks an entry of a map or list of objects (adapters.<name>,
	// chicks.hosts[]): it has a row, but its default is prose, not checked.
	entry bool
}

func TestConfigDocsListEveryField(t *testing.T) {
	rows, err := readFieldTable(configDoc, configHeading)
	if err != nil {
		t.Fatal(err)
	}
	fields := documentedFields(t)
	for _, p := range checkFieldTable(rows, fields) {
		t.Errorf("docs/configuration.md: %s", p)
	}
}

// TestFieldTableCheckFindsProblems makes sure the check above can fail: a
// missing row, a wrong default, a stale row and a duplicate are each named.
func TestFieldTableCheckFindsProblems(t *testing.T) {
	rows, err := readFieldTable(configDoc, configHeading)
	if err != nil {
		t.Fatal(err)
	}
	fields := documentedFields(t)
	if p := checkFieldTable(rows, fields); len(p) != 0 {
		t.Fatalf("the table itself has problems (TestConfigDocsListEveryField reports them): %v", p)
	}
	var bad []docRow
	for _, r := range rows {
		switch r.path {
		case "chicks.resources.memory": // dropped
		case "chicks.timeout":
			r.def = "`31m`"
			bad = append(bad, r)
		case "grpc.advertise":
			r.def = "`admin.socket`"
			bad = append(bad, r)
		case "context.windowTokens":
			r.def = "empty"
			bad = append(bad, r)
		case "chicks.hardening.user":
			r.def = "none"
			bad = append(bad, r)
		case "log.level":
			bad = append(bad, r, r)
		default:
			bad = append(bad, r)
		}
	}
	bad = append(bad, docRow{path: "chicks.colour", def: "`red`", line: 999})
	problems := strings.Join(checkFieldTable(bad, fields), "\n")
	for _, want := range []string{
		"no row for chicks.resources.memory",
		"chicks.timeout: default",
		"grpc.advertise: default",
		"chicks.hardening.user: the table says it has no default",
		"log.level has more than one row",
		"chicks.colour, which is not a config field",
	} {
		if !strings.Contains(problems, want) {
			t.Errorf("checkFieldTable on a doctored table: no problem containing %q; got:\n%s", want, problems)
		}
	}
	// context.windowTokens defaults to 0, which "empty" describes correctly.
	if strings.Contains(problems, "context.windowTokens") {
		t.Errorf("checkFieldTable flagged context.windowTokens, whose default is 0 (empty):\n%s", problems)
	}
}

// configFields walks config.Config after SetDefaults, with one entry in every
// map and list of objects so that their fields have defaults too.
// documentedFields is every field the table must list: Config's, and
// those of each adapter registered in this test binary.
func documentedFields(t *testing.T) []configField {
	t.Helper()
	fields := configFields()
	settings := adapterSettings()
	if len(settings) == 0 {
		t.Fatal("no adapter with settings is registered in this test binary: the adapter rows cannot be checked")
	}
	for typ, v := range settings {
		for _, f := range walkFields("adapters.<name>", v) {
			if !slices.ContainsFunc(fields, func(g configField) bool { return g.path == f.path }) {
				fields = append(fields, f)
			} else {
				t.Logf("adapter %s: %s is documented once for every adapter that has it", typ, f.path)
			}
		}
	}
	return fields
}

func configFields() []configField {
	var c Config
	addSamples(reflect.ValueOf(&c).Elem())
	c.SetDefaults("")
	return walkFields("", reflect.ValueOf(c))
}

// addSamples puts one zero entry (key sampleKey) in every map of objects
// and every list of objects under v, recursively.
func addSamples(v reflect.Value) {
	if isLeaf(v.Type()) {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				addSamples(v.Field(i))
			}
		}
	case reflect.Map:
		if isObject(v.Type().Elem()) {
			e := reflect.New(v.Type().Elem()).Elem()
			addSamples(e)
			v.Set(reflect.MakeMap(v.Type()))
			v.SetMapIndex(reflect.ValueOf(sampleKey), e)
		}
	case reflect.Slice:
		if isObject(v.Type().Elem()) {
			e := reflect.New(v.Type().Elem()).Elem()
			addSamples(e)
			v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
		}
	}
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// isLeaf reports whether t is one value in config.json: a scalar, a type
// with its own JSON form (Duration, DMPolicy), a pointer to a scalar, or a
// list or map of such.
func isLeaf(t reflect.Type) bool {
	if t == adapterType {
		// Its own JSON form only merges the adapter's settings into
		// the same object: its shared fields are fields like any other.
		return false
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		return false
	case reflect.Pointer, reflect.Map, reflect.Slice:
		return !isObject(t.Elem())
	}
	return true
}

// isObject reports whether t is a JSON object with fields of its own.
func isObject(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t == adapterType || t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshaler)
}

// walkFields lists the fields of the struct value v under prefix: maps of
// objects as <name>, lists of objects as [].
func walkFields(prefix string, v reflect.Value) []configField {
	var out []configField
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		t := v.Type()
		if isLeaf(t) {
			out = append(out, configField{path: path, value: v})
			return
		}
		switch t.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				v = reflect.Zero(t.Elem())
			} else {
				v = v.Elem()
			}
			walk(path, v)
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if !f.IsExported() || name == "-" || name == "" {
					continue
				}
				p := name
				if path != "" {
					p = path + "." + name
				}
				walk(p, v.Field(i))
			}
		case reflect.Map:
			p := path + ".<name>"
			out = append(out, configField{path: p, entry: true})
			e := v.MapIndex(reflect.ValueOf(sampleKey))
			if !e.IsValid() {
				e = reflect.Zero(t.Elem())
			}
			walk(p, e)
		case reflect.Slice:
			p := path + "[]"
			out = append(out, configField{path: p, entry: true})
			e := reflect.Zero(t.Elem())
			if v.Len() > 0 {
				e = v.Index(0)
			}
			walk(p, e)
		}
	}
	walk(prefix, v)
	return out
}

var placeholder = regexp.MustCompile(`<[^>]+>`)

// readFieldTable reads the Markdown table that follows heading in file.
func readFieldTable(file, heading string) ([]docRow, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []docRow
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == heading:
			in = true
		case in && strings.HasPrefix(line, "#"):
			in = false
		case in && strings.HasPrefix(line, "| `"):
			cells := tableCells(line)
			if len(cells) < 3 {
				return nil, fmt.Errorf("%s:%d: a row needs Field, Default and Meaning: %q", file, n, line)
			}
			name, ok := codeSpan(cells[0])
			if !ok {
				return nil, fmt.Errorf("%s:%d: the Field cell holds no `field`: %q", file, n, line)
			}
			rows = append(rows, docRow{path: placeholder.ReplaceAllString(name, "<name>"), def: cells[1], line: n})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no table of fields under %q", file, heading)
	}
	return rows, nil
}

// tableCells splits a Markdown table row at its unescaped pipes.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// codeSpan returns the text of the first `code span` in s.
func codeSpan(s string) (string, bool) {
	_, rest, ok := strings.Cut(s, "`")
	if !ok {
		return "", false
	}
	code, _, ok := strings.Cut(rest, "`")
	return code, ok
}

// checkFieldTable compares the table's rows with the fields and returns
// every problem, each naming its field.
func checkFieldTable(rows []docRow, fields []configField) []string {
	var problems []string
	byPath := map[string]configField{}
	for _, f := range fields {
		byPath[f.path] = f
	}
	seen := map[string]int{}
	for _, r := range rows {
		if prev, dup := seen[r.path]; dup {
			problems = append(problems, fmt.Sprintf("line %d: %s has more than one row (also line %d)", r.line, r.path, prev))
			continue
		}
		seen[r.path] = r.line
		f, ok := byPath[r.path]
		if !ok {
			problems = append(problems, fmt.Sprintf("line %d: the row documents %s, which is not a config field (renamed or removed?)", r.line, r.path))
			continue
		}
		if f.entry {
			continue
		}
		if p := checkDefault(r, f, byPath); p != "" {
			problems = append(problems, fmt.Sprintf("line %d: %s", r.line, p))
		}
	}
	for _, f := range fields {
		if _, ok := seen[f.path]; !ok {
			def := "no default"
			if !f.entry && !isZero(effective(f)) {
				def = "default " + show(effective(f))
			}
			problems = append(problems, fmt.Sprintf("no row for %s (%s)", f.path, def))
		}
	}
	return problems
}

// checkDefault compares a row's Default cell with what SetDefaults gives f.
func checkDefault(r docRow, f configField, byPath map[string]configField) string {
	got := effective(f)
	lower := strings.ToLower(r.def)
	if strings.HasPrefix(lower, "none") || strings.HasPrefix(lower, "empty") || strings.HasPrefix(lower, "required") {
		if !isZero(got) {
			return fmt.Sprintf("%s: the table says it has no default (%q), but the code sets %s", f.path, r.def, show(got))
		}
		return ""
	}
	lit, ok := codeSpan(r.def)
	if !ok {
		return fmt.Sprintf("%s: default %q is neither a `value` nor none/empty/required", f.path, r.def)
	}
	var want reflect.Value
	if other, ok := byPath[placeholder.ReplaceAllString(lit, "<name>")]; ok && !other.entry && other.path != f.path {
		want = effective(other)
	} else {
		want, ok = parseLiteral(lit, f.value.Type())
		if !ok {
			return fmt.Sprintf("%s: default `%s` is not a %s", f.path, lit, f.value.Type())
		}
		if want.Kind() == reflect.Pointer && !want.IsNil() {
			want = want.Elem()
		}
	}
	if !sameValue(want, got) {
		return fmt.Sprintf("%s: default %s in the table, but the code sets %s", f.path, r.def, show(got))
	}
	return ""
}

// effective is the value Mother works with when the field is left out. The
// only pointers to scalars are chicks.hardening's switches, for which nil
// means on (see Hardening); any other would need its meaning stated here.
func effective(f configField) reflect.Value {
	v := f.value
	if v.Kind() != reflect.Pointer {
		return v
	}
	if !v.IsNil() {
		return v.Elem()
	}
	if v.Type().Elem().Kind() == reflect.Bool && strings.HasPrefix(f.path, "chicks.hardening.") {
		return reflect.ValueOf(true)
	}
	panic(fmt.Sprintf("%s: a nil %s; say in effective what Mother does with it", f.path, v.Type()))
}

// parseLiteral reads a default written in the table as JSON, or as a bare
// string (`ollama`, `30m`) for string-like types.
func parseLiteral(lit string, t reflect.Type) (reflect.Value, bool) {
	v := reflect.New(t)
	if json.Unmarshal([]byte(lit), v.Interface()) == nil {
		return v.Elem(), true
	}
	q, _ := json.Marshal(lit)
	if json.Unmarshal(q, v.Interface()) == nil {
		return v.Elem(), true
	}
	return reflect.Value{}, false
}

func sameValue(a, b reflect.Value) bool {
	if (a.Kind() == reflect.Slice || a.Kind() == reflect.Map) && a.Kind() == b.Kind() && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return a.Type() == b.Type() && reflect.DeepEqual(a.Interface(), b.Interface())
}

func isZero(v reflect.Value) bool {
	if v.Kind() == reflect.Slice || v.Kind() == reflect.Map {
		return v.Len() == 0
	}
	return v.IsZero()
}

func show(v reflect.Value) string {
	if b, err := json.Marshal(v.Interface()); err == nil {
		return string(b)
	}
	return fmt.Sprint(v.Interface())
}
