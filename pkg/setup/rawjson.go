package setup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// object is a JSON object that keeps its keys in the order of the file
// and its values as they were written, so that setup can change some
// fields and leave every other byte's meaning (and the key order) alone,
// including fields this version of Mother does not know.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func newObject() *object { return &object{vals: map[string]json.RawMessage{}} }

// parseObject reads a JSON object, keeping key order.
func parseObject(b []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	o := newObject()
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, ok := tok.(string)
		if !ok {
			return nil, errors.New("object key is not a string")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.set(k, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return o, nil
}

// MarshalJSON writes the keys in order.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (o *object) has(k string) bool { _, ok := o.vals[k]; return ok }

// set stores v (a json.RawMessage is stored as is), keeping the key's
// place, or appending a new key.
func (o *object) set(k string, v any) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		raw, err = json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("setup: marshal %s: %v", k, err))
		}
	}
	if !o.has(k) {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = raw
}

func (o *object) remove(k string) {
	if !o.has(k) {
		return
	}
	delete(o.vals, k)
	for i, x := range o.keys {
		if x == k {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
}

// child returns the object under k (a fresh one if absent or not an
// object).
func (o *object) child(k string) *object {
	if raw, ok := o.vals[k]; ok {
		if c, err := parseObject(raw); err == nil {
			return c
		}
	}
	return newObject()
}

// at follows path and returns the raw value there, or nil.
func (o *object) at(path ...string) json.RawMessage {
	cur := o
	for i, k := range path {
		raw, ok := cur.vals[k]
		if !ok {
			return nil
		}
		if i == len(path)-1 {
			return raw
		}
		c, err := parseObject(raw)
		if err != nil {
			return nil
		}
		cur = c
	}
	return nil
}

// setAt stores v at path, making objects on the way.
func (o *object) setAt(v any, path ...string) {
	if len(path) == 1 {
		o.set(path[0], v)
		return
	}
	c := o.child(path[0])
	c.setAt(v, path[1:]...)
	o.set(path[0], c)
}

// removeAt deletes the value at path, if there.
func (o *object) removeAt(path ...string) {
	if len(path) == 1 {
		o.remove(path[0])
		return
	}
	if !o.has(path[0]) {
		return
	}
	c := o.child(path[0])
	c.removeAt(path[1:]...)
	o.set(path[0], c)
}

// str reads a string at path ("" when absent or not a string).
func (o *object) str(path ...string) string {
	var s string
	if raw := o.at(path...); raw != nil {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// strs reads a list of strings at path.
func (o *object) strs(path ...string) []string {
	var s []string
	if raw := o.at(path...); raw != nil {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// num reads a whole number at path; ok is false when absent.
func (o *object) num(path ...string) (int64, bool) {
	raw := o.at(path...)
	if raw == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil
}

// list reads the array at path as raw elements.
func (o *object) list(path ...string) []json.RawMessage {
	var l []json.RawMessage
	if raw := o.at(path...); raw != nil {
		_ = json.Unmarshal(raw, &l)
	}
	return l
}

// encode writes the object indented with two spaces and a final newline.
func (o *object) encode() ([]byte, error) {
	b, err := o.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
