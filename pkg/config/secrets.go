package config

import (
	"reflect"
	"sort"
)

// SecretValues returns every secret value of the configuration: each
// Secret field, the platform settings' included (bot and app tokens), and
// the environment values given to host tool servers, which often carry
// keys (those of at least MinEnvSecret characters: "1", "true" or "info"
// are settings, and hiding them would blank every digit or word they
// match). Read-only views (the status page) make sure none of them is
// ever shown. Empty values are left out; the result is sorted, longest
// first, so that a secret containing another is replaced whole.
func (c *Config) SecretValues() []string {
	seen := map[string]bool{}
	collectSecrets(reflect.ValueOf(c), seen)
	for _, s := range c.MCPServers {
		for _, v := range s.Env {
			if len(v) >= MinEnvSecret {
				seen[v] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// MinEnvSecret is the shortest host tool server environment value
// SecretValues counts as a secret.
const MinEnvSecret = 8

var secretType = reflect.TypeOf(Secret(""))

func collectSecrets(v reflect.Value, seen map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collectSecrets(v.Elem(), seen)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				collectSecrets(v.Field(i), seen)
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			collectSecrets(v.MapIndex(k), seen)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			collectSecrets(v.Index(i), seen)
		}
	case reflect.String:
		if v.Type() == secretType && v.String() != "" {
			seen[v.String()] = true
		}
	}
}
