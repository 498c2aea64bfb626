package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mother-chat/mother/pkg/dataformat"
)

// Config fields across releases. A release cannot know the fields a newer
// one added: it refuses them as unknown, and names the newer release when
// the data directory's format file says one ran there (Load). What a
// release knows is kept in two tables: the fields each release added
// (added) and the fields renamed (renames). A field's old name keeps
// working, with a warning, for at least one release after its rename; a
// rollback tells which fields the older release will refuse.

// Rename is a field a release renamed. Old and New are dotted JSON paths
// with the same parent; a "*" segment stands for any key of an object or
// any element of a list ("adapters.*.dm").
type Rename struct {
	Old, New string
	// Release is the release that renamed it.
	Release string
}

// Added is a field a release added (dotted path as in Rename). Every field
// not listed came with 0.1.0.
type Added struct {
	Field   string
	Release string
}

// renames maps old names to new ones. None yet.
var renames = []Rename{}

// added lists the fields added after 0.1.0. None yet.
var added = []Added{}

// RenamedField is an old field name found in config.json, with the
// concrete paths ("adapters.acme.dm").
type RenamedField struct {
	Old, New, Release string
}

// Warning is the sentence logged at start and shown by --check-config.
func (r RenamedField) Warning() string {
	return fmt.Sprintf("config field %s was renamed to %s in Mother %s; the old name still works for now: rename it in config.json", r.Old, r.New, r.Release)
}

// Renamed lists the old field names config.json used (Load read them as
// their new names).
func (c *Config) Renamed() []RenamedField { return c.renamed }

// node is one object found for a path pattern: the object, and its
// concrete path.
type node struct {
	obj  map[string]any
	path string
}

// objectsAt finds the objects at the parent pattern segs under v.
func objectsAt(v any, segs []string, path string) []node {
	if len(segs) == 0 {
		if m, ok := v.(map[string]any); ok {
			return []node{{obj: m, path: path}}
		}
		return nil
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	var out []node
	switch x := v.(type) {
	case map[string]any:
		if segs[0] == "*" {
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				out = append(out, objectsAt(x[k], segs[1:], join(k))...)
			}
		} else if c, ok := x[segs[0]]; ok {
			out = append(out, objectsAt(c, segs[1:], join(segs[0]))...)
		}
	case []any:
		if segs[0] == "*" {
			for i, c := range x {
				out = append(out, objectsAt(c, segs[1:], fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return out
}

// splitField is a dotted path's parent segments and last key.
func splitField(p string) ([]string, string) {
	segs := strings.Split(p, ".")
	return segs[:len(segs)-1], segs[len(segs)-1]
}

// decodeLoose decodes config JSON keeping numbers as written (nil: it does
// not decode; Parse reports why).
func decodeLoose(b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

// applyRenames gives every old field name in b its new name. Both names
// set at once is a problem naming both.
func applyRenames(b []byte, table []Rename) ([]byte, []RenamedField, Errors) {
	if len(table) == 0 {
		return b, nil, nil
	}
	root := decodeLoose(b)
	if root == nil {
		return b, nil, nil
	}
	var found []RenamedField
	var problems Errors
	for _, r := range table {
		parent, oldKey := splitField(r.Old)
		_, newKey := splitField(r.New)
		for _, n := range objectsAt(root, parent, "") {
			v, ok := n.obj[oldKey]
			if !ok {
				continue
			}
			at := func(k string) string {
				if n.path == "" {
					return k
				}
				return n.path + "." + k
			}
			if _, both := n.obj[newKey]; both {
				problems = append(problems, FieldError{Field: at(oldKey), Msg: fmt.Sprintf("renamed to %s in Mother %s, which is set too: remove %s", at(newKey), r.Release, oldKey)})
				continue
			}
			delete(n.obj, oldKey)
			n.obj[newKey] = v
			found = append(found, RenamedField{Old: at(oldKey), New: at(newKey), Release: r.Release})
		}
	}
	if len(found) == 0 {
		return b, nil, problems
	}
	out, err := json.Marshal(root)
	if err != nil {
		return b, nil, problems
	}
	return out, found, problems
}

// notKnownHint rewrites the unknown-field problems when the data
// directory was last run by a newer release than this one: that release
// may have added the field.
func notKnownHint(problems Errors, dataDir string) {
	last := dataformat.LastRelease(dataDir)
	if last == "" || dataformat.Compare(last, dataformat.Release) <= 0 {
		return
	}
	for i, p := range problems {
		if strings.HasPrefix(p.Msg, "unknown field") {
			problems[i].Msg = fmt.Sprintf("not known to Mother %s; the data directory was last run by Mother %s, which may have added it: remove it to run %s, or run Mother %s again",
				dataformat.Release, last, dataformat.Release, last)
		}
	}
}

// NotKnownTo lists, in sentences, the fields of dataDir/config.json that
// release (an older one) does not know: added after it, or renamed after
// it (the new name is in use). A rollback shows them: that release would
// refuse config.json until they are changed.
func NotKnownTo(dataDir, release string) []string {
	b, err := os.ReadFile(filepath.Join(dataDir, File))
	if err != nil {
		return nil
	}
	return notKnownTo(b, release, added, renames)
}

func notKnownTo(b []byte, release string, added []Added, renames []Rename) []string {
	root := decodeLoose(b)
	if root == nil {
		return nil
	}
	var out []string
	present := func(field string) []string {
		parent, key := splitField(field)
		var at []string
		for _, n := range objectsAt(root, parent, "") {
			if _, ok := n.obj[key]; ok {
				if n.path == "" {
					at = append(at, key)
				} else {
					at = append(at, n.path+"."+key)
				}
			}
		}
		return at
	}
	for _, a := range added {
		if dataformat.Compare(a.Release, release) <= 0 {
			continue
		}
		for _, p := range present(a.Field) {
			out = append(out, fmt.Sprintf("config field %s came with Mother %s; Mother %s refuses it: remove it from config.json before starting %s", p, a.Release, release, release))
		}
	}
	for _, r := range renames {
		if dataformat.Compare(r.Release, release) <= 0 {
			continue
		}
		_, oldKey := splitField(r.Old)
		for _, p := range present(r.New) {
			out = append(out, fmt.Sprintf("config field %s was named %s before Mother %s; Mother %s knows only the old name: rename it back in config.json before starting %s", p, oldKey, r.Release, release, release))
		}
	}
	return out
}
