package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/names"
)

// Duration is a time.Duration written as "30m", "1h30m".
type Duration struct {
	time.Duration
	invalid string
}

// Dur makes a Duration.
func Dur(d time.Duration) Duration { return Duration{Duration: d} }

// UnmarshalJSON accepts a Go duration string. A bad value is kept and
// reported by Validate with the field's name.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		*d = Duration{invalid: fmt.Sprintf("must be a duration string such as \"90s\" or \"30m\", not %s", b)}
		return nil
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		*d = Duration{invalid: fmt.Sprintf("must be a duration such as \"90s\" or \"30m\", not %q", s)}
	case v < 0:
		*d = Duration{invalid: fmt.Sprintf("must not be negative, got %q", s)}
	default:
		*d = Duration{Duration: v}
	}
	return nil
}

func (d Duration) decodeProblem() string { return d.invalid }

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// decodeProblems walks v (a struct) and reports values that decoded with a
// problem, by their JSON path.
func decodeProblems(v reflect.Value, path string, out *Errors) {
	type problem interface{ decodeProblem() string }
	if v.CanInterface() {
		if p, ok := v.Interface().(problem); ok {
			if msg := p.decodeProblem(); msg != "" {
				*out = append(*out, FieldError{Field: path, Msg: msg})
			}
			return
		}
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			decodeProblems(v.Elem(), path, out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Tag.Get("config") == "inline" {
				decodeProblems(v.Field(i), path, out)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				name = f.Name
			}
			decodeProblems(v.Field(i), join(name), out)
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			decodeProblems(v.MapIndex(k), join(k.String()), out)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			decodeProblems(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// FieldError is a problem with one field.
type FieldError struct {
	Field string
	Msg   string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Msg }

// Errors is every problem found in a config.
type Errors []FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// File is the config file name inside the data directory.
const File = "config.json"

// Load reads <dataDir>/config.json (absent: defaults), applies environment
// overrides from getenv (nil: os.Getenv), fills defaults and validates.
// The error, if any, lists every problem by field.
func Load(dataDir string, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var (
		cfg   Config
		shape Errors // unknown fields and wrong types
	)
	path := filepath.Join(dataDir, File)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	default:
		// Old names of renamed fields are read as their new names.
		var conflicts Errors
		b, cfg.renamed, conflicts = applyRenames(b, renames)
		shape = conflicts
		if err := Parse(b, &cfg); err != nil {
			var es Errors
			if !errors.As(err, &es) || es.fileLevel() {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			// Unknown fields and wrong types: the rest is still read and
			// checked, so one run reports every problem (a misspelt field
			// does not hide an unknown adapter type).
			shape = append(shape, es...)
			_ = json.Unmarshal(b, &cfg)
		}
	}
	// Values that decoded with a problem are reported together with what
	// Validate finds, so one run shows every problem.
	problems := shape
	decodeProblems(reflect.ValueOf(&cfg), "", &problems)
	cfg.ApplyEnv(getenv)
	cfg.SetDefaults(dataDir)
	if err := cfg.Validate(); err != nil {
		for _, p := range err.(Errors) {
			if !shape.covers(p.Field) {
				problems = append(problems, p)
			}
		}
	}
	if len(problems) > 0 {
		notKnownHint(problems, dataDir)
		return nil, fmt.Errorf("%s: %w", path, problems)
	}
	return &cfg, nil
}

// fileLevel reports whether es is about the file as a whole (syntax, not
// an object), so nothing else can be read from it.
func (es Errors) fileLevel() bool {
	for _, e := range es {
		if e.Field == "(file)" {
			return true
		}
	}
	return false
}

// covers reports whether field is, or lies within, a field es already
// reports: its value was not read, so Validate's view of it adds nothing.
func (es Errors) covers(field string) bool {
	for _, e := range es {
		if field == e.Field || strings.HasPrefix(field, e.Field+".") || strings.HasPrefix(field, e.Field+"[") {
			return true
		}
	}
	return false
}

// Parse decodes config JSON strictly: unknown fields and wrong types are
// errors naming the field by its full JSON path ("adapters.d.admins"), all
// of them at once; syntax errors give line and column. Values of the right
// JSON type but a bad form (a duration, a dm policy) are reported by Load.
func Parse(b []byte, cfg *Config) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return Errors{{Field: "(file)", Msg: "empty file; write {} for all defaults"}}
	}
	var probe any
	if err := json.Unmarshal(b, &probe); err != nil {
		return Errors{syntaxError(b, err)}
	}
	if _, ok := probe.(map[string]any); !ok {
		return Errors{{Field: "(file)", Msg: "must be a JSON object ({...})"}}
	}
	var es Errors
	checkShape(b, reflect.TypeOf(cfg).Elem(), "", &es)
	if len(es) > 0 {
		return es
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return Errors{{Field: "(file)", Msg: err.Error()}}
	}
	return nil
}

func syntaxError(b []byte, err error) FieldError {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(b, se.Offset)
		return FieldError{Field: "(file)", Msg: fmt.Sprintf("JSON syntax error at line %d, column %d: %v", line, col, se)}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return FieldError{Field: "(file)", Msg: "unexpected end of file (unclosed object or string)"}
	}
	return FieldError{Field: "(file)", Msg: err.Error()}
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkShape walks raw JSON alongside the Go type t and reports unknown
// fields and values of the wrong JSON type, with their full paths.
func checkShape(raw []byte, t reflect.Type, path string, out *Errors) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	leaf := func() {
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			var te *json.UnmarshalTypeError
			msg := err.Error()
			if errors.As(err, &te) {
				msg = fmt.Sprintf("must be %s, not JSON %s", kindName(te.Type), te.Value)
			}
			*out = append(*out, FieldError{Field: path, Msg: msg})
		}
	}
	if t == adapterType {
		checkAdapterShape(raw, path, out)
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		leaf()
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkShape(raw, t.Elem(), path, out)
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			*out = append(*out, FieldError{Field: path, Msg: "must be an object, not JSON " + jsonKindOf(raw)})
			return
		}
		for _, k := range sortedKeys(m) {
			f, ok := fieldByJSONName(t, k)
			if !ok {
				*out = append(*out, FieldError{Field: join(k), Msg: unknownField(k, jsonNames(t))})
				continue
			}
			checkShape(m[k], f.Type, join(k), out)
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			*out = append(*out, FieldError{Field: path, Msg: "must be an object, not JSON " + jsonKindOf(raw)})
			return
		}
		for _, k := range sortedKeys(m) {
			checkShape(m[k], t.Elem(), join(k), out)
		}
	case reflect.Slice:
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) != nil {
			if string(bytes.TrimSpace(raw)) != "null" {
				*out = append(*out, FieldError{Field: path, Msg: "must be a list, not JSON " + jsonKindOf(raw)})
			}
			return
		}
		for i, v := range a {
			checkShape(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		leaf()
	}
}

func jsonKindOf(raw []byte) string {
	var v any
	_ = json.Unmarshal(raw, &v)
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// fieldByJSONName finds a struct field the way encoding/json does: exact
// tag name first, then case-insensitively.
// unknownField is the message for an unknown field k among known.
func unknownField(k string, known []string) string {
	if near := names.Nearest(k, known); near != "" {
		return fmt.Sprintf("unknown field (did you mean %q? docs/configuration.md lists every field)", near)
	}
	return "unknown field (check the spelling; docs/configuration.md lists every field)"
}

// jsonNames are the JSON names of the struct types' fields.
func jsonNames(ts ...reflect.Type) []string {
	var out []string
	for _, t := range ts {
		if t == nil {
			continue
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || tag == "-" {
				continue
			}
			if tag == "" {
				tag = f.Name
			}
			out = append(out, tag)
		}
	}
	return out
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	var fold *reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
		if fold == nil && strings.EqualFold(tag, name) {
			fold = &f
		}
	}
	if fold != nil {
		return *fold, true
	}
	return reflect.StructField{}, false
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

func position(b []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < off-1 && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// SortedAdapterNames returns the adapter names in order.
func (c *Config) SortedAdapterNames() []string {
	return sortedKeys(c.Adapters)
}
