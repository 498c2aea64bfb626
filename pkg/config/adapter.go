package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
)

// Adapter is one chat platform account: the fields every platform shares,
// plus the platform's own settings. Both are written in the same JSON
// object:
//
//	"slack-acme": {"type": "slack", "admins": ["U1"], "botToken": "xoxb-...", "appToken": "xapp-..."}
//
// The platform's fields (tokens, API URL, guild) belong to the adapter
// package, which declares them with RegisterAdapter; config knows none of
// them.
type Adapter struct {
	// Type is the platform: a type registered with RegisterAdapter
	// ("discord", "slack", "cli").
	Type string `json:"type"`
	// Admins are user ids with admin rights; they can always DM Mother.
	Admins []string `json:"admins"`
	// DM says who else may DM Mother: "everyone", "none", or a list of ids.
	DM DMPolicy `json:"dm"`
	// Quiet hides tool details and usage in this adapter's channels.
	Quiet bool `json:"quiet"`
	// QuietChannels hides tool details and usage in the listed channels.
	QuietChannels []string `json:"quietChannels"`
	// Settings are the platform's own fields, decoded from the same object
	// into the type's settings (a pointer to the adapter package's struct).
	// Nil for a type without settings or an unknown type.
	Settings AdapterSettings `json:"-" config:"inline"`
}

// AdapterSettings is the platform half of an adapter's configuration: a
// pointer to a struct whose json-tagged fields sit beside the shared ones.
type AdapterSettings interface {
	// Validate reports each problem through bad, naming the field as it is
	// written in the adapter's object ("botToken"); config prefixes the
	// adapter's path. A message never holds a token's value.
	Validate(bad func(field, format string, args ...any))
}

// AdapterSpec is what an adapter package declares about its configuration.
type AdapterSpec struct {
	// NewSettings returns fresh zero settings (a pointer). Nil: the
	// platform has no settings of its own, and any field beyond the shared
	// ones is unknown.
	NewSettings func() AdapterSettings
	// Env are the environment variables that override settings.
	Env []EnvOverride
	// Fields documents every settings field (a test checks none is
	// missing; see UndocumentedFields).
	Fields []FieldDoc
}

// EnvOverride is one environment variable that sets an adapter field. A
// non-empty value edits the only adapter of the type, or the one named
// after the type when there are several; with none, it creates an adapter
// named after the type.
type EnvOverride struct {
	// Var is the variable ("DISCORD_BOT_TOKEN").
	Var string
	// Field is the JSON field it sets ("botToken").
	Field string
	// Set stores value into settings (made by the spec's NewSettings).
	Set func(settings AdapterSettings, value string)
}

// FieldDoc documents one field of an adapter's JSON object.
type FieldDoc struct {
	// Name is the JSON field name.
	Name string
	// Type is how it is written: "string", "secret", "list of ids", ...
	Type string
	// Default is the value when unset (empty: none).
	Default string
	// Env is the environment variable that overrides it, if any.
	Env string
	// Doc says what it does, in a sentence or two.
	Doc string
}

// AdapterFields documents the fields every adapter has, whatever its type.
var AdapterFields = []FieldDoc{
	{Name: "type", Type: "string", Doc: "The platform: one of the registered adapter types."},
	{Name: "admins", Type: "list of user ids", Doc: "Users with admin rights; they can always DM Mother."},
	{Name: "dm", Type: `"everyone", "none" or a list of user ids`, Default: `"none"`, Doc: "Who else may DM Mother."},
	{Name: "quiet", Type: "bool", Default: "false", Doc: "Hide tool details and usage in this adapter's channels."},
	{Name: "quietChannels", Type: "list of channel ids", Doc: "Hide tool details and usage in the listed channels."},
}

var (
	adapterMu    sync.RWMutex
	adapterSpecs = map[string]AdapterSpec{}
)

// RegisterAdapter declares the configuration of an adapter type. Adapter
// packages call it (through chat.Register) from init; registering a type
// twice panics, as that is a programming error.
func RegisterAdapter(typ string, spec AdapterSpec) {
	adapterMu.Lock()
	defer adapterMu.Unlock()
	if _, dup := adapterSpecs[typ]; dup {
		panic("config: adapter type registered twice: " + typ)
	}
	adapterSpecs[typ] = spec
}

// LookupAdapter returns the spec registered for an adapter type.
func LookupAdapter(typ string) (AdapterSpec, bool) {
	adapterMu.RLock()
	defer adapterMu.RUnlock()
	s, ok := adapterSpecs[typ]
	return s, ok
}

// AdapterTypes lists the registered adapter types, sorted.
func AdapterTypes() []string {
	adapterMu.RLock()
	defer adapterMu.RUnlock()
	return sortedKeys(adapterSpecs)
}

// UndocumentedFields lists the JSON fields of spec's settings that
// spec.Fields does not document, and documented names that are no field.
func UndocumentedFields(spec AdapterSpec) []string {
	var out []string
	documented := map[string]bool{}
	for _, f := range spec.Fields {
		documented[f.Name] = true
	}
	fields := map[string]bool{}
	if t := settingsType(spec); t != nil {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fields[name] = true
			if !documented[name] {
				out = append(out, name)
			}
		}
	}
	for _, f := range spec.Fields {
		if !fields[f.Name] {
			out = append(out, f.Name+" (documented, but no such field)")
		}
	}
	return out
}

// settingsType is the struct type of spec's settings, or nil.
func settingsType(spec AdapterSpec) reflect.Type {
	if spec.NewSettings == nil {
		return nil
	}
	t := reflect.TypeOf(spec.NewSettings())
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

// adapterShared is Adapter without its methods, for decoding the shared
// fields.
type adapterShared Adapter

var (
	adapterType       = reflect.TypeFor[Adapter]()
	adapterSharedType = reflect.TypeFor[adapterShared]()
)

// adapterTypeOf reads the "type" field of an adapter object, or "".
func adapterTypeOf(m map[string]json.RawMessage) string {
	if v, ok := m["type"]; ok {
		var s string
		_ = json.Unmarshal(v, &s)
		return s
	}
	for k, v := range m {
		if strings.EqualFold(k, "type") {
			var s string
			_ = json.Unmarshal(v, &s)
			return s
		}
	}
	return ""
}

// UnmarshalJSON decodes the shared fields, then the rest into the
// settings of the registered type. Unknown fields of a known type are
// errors (Parse reports them by path first); those of an unknown type are
// left for Validate, which reports the type.
func (a *Adapter) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	var sh adapterShared
	rest := map[string]json.RawMessage{}
	for k, v := range m {
		if _, ok := fieldByJSONName(adapterSharedType, k); ok {
			continue
		}
		rest[k] = v
	}
	if err := json.Unmarshal(b, &sh); err != nil {
		return err
	}
	*a = Adapter(sh)
	spec, ok := LookupAdapter(a.Type)
	if !ok {
		return nil
	}
	if spec.NewSettings == nil {
		for k := range rest {
			return fmt.Errorf("json: unknown field %q", k)
		}
		return nil
	}
	s := spec.NewSettings()
	rb, err := json.Marshal(rest)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(rb))
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		return err
	}
	a.Settings = s
	return nil
}

// MarshalJSON writes the shared fields and the settings in one object.
func (a Adapter) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(adapterShared(a))
	if err != nil || a.Settings == nil {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	sb, err := json.Marshal(a.Settings)
	if err != nil {
		return nil, err
	}
	var sm map[string]json.RawMessage
	if err := json.Unmarshal(sb, &sm); err != nil {
		return nil, err
	}
	for k, v := range sm {
		m[k] = v
	}
	return json.Marshal(m)
}

// checkAdapterShape is checkShape for one adapter object: shared fields
// against Adapter, the rest against the registered type's settings.
func checkAdapterShape(raw []byte, path string, out *Errors) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		*out = append(*out, FieldError{Field: path, Msg: "must be an object, not JSON " + jsonKindOf(raw)})
		return
	}
	spec, known := LookupAdapter(adapterTypeOf(m))
	st := settingsType(spec)
	for _, k := range sortedKeys(m) {
		if f, ok := fieldByJSONName(adapterSharedType, k); ok {
			checkShape(m[k], f.Type, path+"."+k, out)
			continue
		}
		if st != nil {
			if f, ok := fieldByJSONName(st, k); ok {
				checkShape(m[k], f.Type, path+"."+k, out)
				continue
			}
		}
		if known {
			*out = append(*out, FieldError{Field: path + "." + k, Msg: unknownField(k, jsonNames(adapterSharedType, st))})
		}
	}
}

// applyAdapterEnv applies the registered adapters' environment overrides.
func (c *Config) applyAdapterEnv(getenv func(string) string) {
	for _, typ := range AdapterTypes() {
		spec, _ := LookupAdapter(typ)
		for _, o := range spec.Env {
			v := getenv(o.Var)
			if v == "" || spec.NewSettings == nil {
				continue
			}
			c.overrideAdapter(typ, func(a *Adapter) {
				if a.Settings == nil {
					a.Settings = spec.NewSettings()
				}
				o.Set(a.Settings, v)
			})
		}
	}
}

// setAdapterDefaults gives every adapter of a known type its settings.
func (c *Config) setAdapterDefaults() {
	for name, a := range c.Adapters {
		spec, ok := LookupAdapter(a.Type)
		if ok && a.Settings == nil && spec.NewSettings != nil {
			a.Settings = spec.NewSettings()
			c.Adapters[name] = a
		}
	}
}

// typeChoices is the registered types for a message: ("cli", "discord" or
// "slack").
func typeChoices() string {
	ts := AdapterTypes()
	q := make([]string, len(ts))
	for i, t := range ts {
		q[i] = fmt.Sprintf("%q", t)
	}
	switch len(q) {
	case 0:
		return "(no adapter type is registered in this build)"
	case 1:
		return "(" + q[0] + ")"
	}
	return "(" + strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1] + ")"
}

func (c *Config) validateAdapters(p *problems) {
	for _, name := range c.SortedAdapterNames() {
		a := c.Adapters[name]
		f := "adapters." + name
		if err := validName(name); err != "" {
			p.bad(f, "adapter name %s", err)
		}
		spec, known := LookupAdapter(a.Type)
		switch {
		case a.Type == "":
			p.bad(f+".type", "missing %s", typeChoices())
		case !known:
			p.bad(f+".type", "unknown adapter type %q %s", a.Type, typeChoices())
		default:
			s := a.Settings
			if s == nil && spec.NewSettings != nil {
				s = spec.NewSettings()
			}
			if s != nil {
				s.Validate(func(field, format string, args ...any) {
					p.bad(f+"."+field, format, args...)
				})
			}
		}
		for i, id := range a.Admins {
			if strings.TrimSpace(id) == "" {
				p.bad(fmt.Sprintf("%s.admins[%d]", f, i), "empty user id")
			}
		}
		for i, id := range a.DM.Users {
			if strings.TrimSpace(id) == "" {
				p.bad(fmt.Sprintf("%s.dm[%d]", f, i), "empty user id")
			}
		}
	}
}

// IsHTTPURL reports whether s is an absolute http:// or https:// URL with a
// host, as adapters' apiURL settings must be.
func IsHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// AdapterDoc is the documentation of one registered adapter type.
type AdapterDoc struct {
	Type   string
	Fields []FieldDoc
}

// AdapterDocs documents every registered adapter type's own fields, sorted
// by type; AdapterFields holds the shared ones. A docs page lists both.
func AdapterDocs() []AdapterDoc {
	var out []AdapterDoc
	for _, t := range AdapterTypes() {
		spec, _ := LookupAdapter(t)
		out = append(out, AdapterDoc{Type: t, Fields: spec.Fields})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}
