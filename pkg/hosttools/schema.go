package hosttools

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mother-chat/mother/pkg/prompt"
)

// compileSchema resolves a tool's input schema for validation. Schemas in
// draft 2020-12 and draft-07 are understood; one that cannot be resolved
// (an unsupported draft, a remote $ref) returns an error and the tool is
// then called without local validation (the server still validates).
func compileSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("the tool has no input schema")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return r, nil
}

// schemaNode is the part of a JSON schema the parameter summary reads.
type schemaNode struct {
	Type        any                    `json:"type"`
	Enum        []any                  `json:"enum"`
	Const       any                    `json:"const"`
	Items       *schemaNode            `json:"items"`
	Properties  map[string]*schemaNode `json:"properties"`
	Required    []string               `json:"required"`
	Description string                 `json:"description"`
	AnyOf       []*schemaNode          `json:"anyOf"`
	OneOf       []*schemaNode          `json:"oneOf"`
	Ref         string                 `json:"$ref"`
}

// summarise turns an object schema into the prompt's parameter list:
// required parameters first, in the schema's order, then the optional ones
// by name.
func summarise(raw json.RawMessage) []prompt.HostToolParam {
	var root schemaNode
	if json.Unmarshal(raw, &root) != nil || len(root.Properties) == 0 {
		return nil
	}
	names := make([]string, 0, len(root.Properties))
	for n := range root.Properties {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := slices.Index(root.Required, names[i]), slices.Index(root.Required, names[j])
		switch {
		case ri >= 0 && rj >= 0:
			return ri < rj
		case ri >= 0 || rj >= 0:
			return ri >= 0
		}
		return names[i] < names[j]
	})
	out := make([]prompt.HostToolParam, 0, len(names))
	for _, n := range names {
		p := root.Properties[n]
		if p == nil {
			p = &schemaNode{}
		}
		out = append(out, prompt.HostToolParam{
			Name:        n,
			Type:        typeOf(p, 0),
			Description: p.Description,
			Required:    slices.Contains(root.Required, n),
		})
	}
	return out
}

// typeOf is a short type for a schema: string, integer[], "a"|"b",
// string|null, object, any.
func typeOf(n *schemaNode, depth int) string {
	if n == nil || depth > 3 {
		return "any"
	}
	if s, ok := n.Const.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	if len(n.Enum) > 0 && len(n.Enum) <= 8 {
		var vals []string
		for _, e := range n.Enum {
			b, _ := json.Marshal(e)
			vals = append(vals, string(b))
		}
		return strings.Join(vals, "|")
	}
	var types []string
	switch t := n.Type.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
	}
	if len(types) == 0 {
		alts := append(append([]*schemaNode(nil), n.AnyOf...), n.OneOf...)
		if len(alts) > 0 {
			var parts []string
			for _, a := range alts {
				if t := typeOf(a, depth+1); !slices.Contains(parts, t) {
					parts = append(parts, t)
				}
			}
			return strings.Join(parts, "|")
		}
		switch {
		case n.Properties != nil || n.Ref != "":
			return "object"
		case n.Items != nil:
			types = []string{"array"}
		default:
			return "any"
		}
	}
	if len(types) > 1 {
		// A nullable parameter is shown by its real type: leaving it out
		// is what the model should do.
		types = slices.DeleteFunc(types, func(t string) bool { return t == "null" })
	}
	for i, t := range types {
		if t == "array" {
			item := "any"
			if n.Items != nil {
				item = typeOf(n.Items, depth+1)
			}
			if strings.Contains(item, "|") {
				item = "(" + item + ")"
			}
			types[i] = item + "[]"
		}
	}
	return strings.Join(types, "|")
}

// decodeArgs turns the model's args into the JSON object MCP sends. Absent
// or null args are an empty object; a JSON string holding an object (small
// models do that) is unwrapped. Anything else is an error.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("args is not valid JSON: %v", err)
	}
	if str, ok := v.(string); ok {
		inner := strings.TrimSpace(str)
		if inner == "" {
			return map[string]any{}, nil
		}
		if err := json.Unmarshal([]byte(inner), &v); err != nil {
			return nil, fmt.Errorf("args must be an object of the tool's parameters, got a string")
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("args must be an object of the tool's parameters, got %s", jsonKind(v))
	}
	return obj, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}
