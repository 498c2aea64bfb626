package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/names"
)

// Small local models often break a tool call's arguments: they send a
// string holding the object, a trailing comma, single quotes, Python's
// True, a field name with a typo, "30" for an integer. CheckArgs looks at
// the arguments before the tool runs and, when something is wrong, tells
// the model exactly what to fix, so its next attempt has a chance.

// maxProblems caps the problems listed in one message; the rest are
// counted.
const maxProblems = 5

// NearestName returns the name in names closest to name (edit distance,
// case-insensitive), or "" when none is close enough to be a plausible
// typo (see names.Nearest).
func NearestName(name string, candidates []string) string { return names.Nearest(name, candidates) }

// CheckArgs validates args against schema (a tool's model.ToolSpec.Parameters,
// a JSON Schema object). It returns the arguments to run the tool with and ""
// when they are fine; when they are not, it returns a message for the model
// saying exactly what to fix (one problem a line, then a line restating the
// expected shape) and args unchanged.
//
// Empty arguments (no bytes, blanks, null) count as {}. The only repair is
// of a JSON string holding the object (even doubly encoded): it is
// unambiguous, so the object inside is used. Anything else is reported,
// never guessed at. When nothing was repaired, fixed is args itself, byte
// for byte.
//
// Only the part of JSON Schema that tool schemas use is checked: type,
// properties, required, enum, items, additionalProperties, minimum and
// maximum. Other keywords ($ref, oneOf, pattern, format, ...) are ignored,
// and an empty or unreadable schema accepts any object: host tools bring
// schemas we do not control, and their servers check them again.
func CheckArgs(schema, args json.RawMessage) (fixed json.RawMessage, problem string) {
	root := parseSchema(schema)
	data := trimJSON(args)
	// repaired is set when data no longer is args; wasString when it was
	// a string holding the object.
	repaired, wasString := false, false
	switch {
	case isEmptyArgs(data):
		data, repaired = []byte("{}"), true
	case !json.Valid(data):
		return args, report([]string{"arguments are not valid JSON: " + syntaxProblem(data)}, root)
	case data[0] == '"':
		inner, msg := unwrapString(data)
		if msg != "" {
			return args, report([]string{msg}, root)
		}
		data, repaired, wasString = inner, true, true
	}
	if data[0] != '{' {
		return args, report([]string{notObject(data)}, root)
	}
	v, err := decodeValue(data)
	obj, ok := v.(*object)
	if err != nil || !ok {
		// Not reached: data is a valid JSON object.
		return args, report([]string{"arguments must be a JSON object"}, root)
	}
	var c checker
	c.object(root, obj, "")
	if len(c.problems) > 0 {
		lines := c.lines()
		if wasString {
			lines = append([]string{"send the arguments as a JSON object, not as a string holding one"}, lines...)
		}
		return args, report(lines, root)
	}
	if repaired {
		return json.RawMessage(data), ""
	}
	return args, ""
}

// isEmptyArgs reports whether trimmed arguments mean "no arguments".
func isEmptyArgs(trimmed []byte) bool {
	return len(trimmed) == 0 || string(trimmed) == "null"
}

// trimJSON trims JSON's whitespace (narrower than Unicode's: no \f, no
// \v), so that what is left is valid JSON exactly when the input was.
func trimJSON(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// report joins problem lines and ends them with the expected shape.
func report(lines []string, root *schemaNode) string {
	return strings.Join(lines, "\n") + "\nexpected: " + rootShape(root)
}

// unwrapString takes arguments that are a JSON string and returns the
// object the string holds (decoding up to three times, for arguments
// encoded twice or more), or a message when it holds anything else.
func unwrapString(data []byte) (json.RawMessage, string) {
	for range 3 {
		var s string
		if json.Unmarshal(data, &s) != nil {
			return nil, "arguments must be a JSON object"
		}
		inner := trimJSON([]byte(s))
		switch {
		case isEmptyArgs(inner):
			return json.RawMessage("{}"), ""
		case !json.Valid(inner):
			if inner[0] == '{' {
				return nil, "arguments must be a JSON object, not a string; the string's content is not valid JSON either: " + syntaxProblem(inner)
			}
			return nil, "arguments must be a JSON object, got a string " + quote(shorten(s, 40))
		case inner[0] == '{':
			return inner, ""
		case inner[0] != '"':
			return nil, "arguments must be a JSON object, got a string holding " + kindOf(inner)
		}
		data = inner
	}
	return nil, "arguments must be a JSON object, got a string"
}

// notObject describes valid JSON arguments that are not an object.
func notObject(data []byte) string {
	msg := "arguments must be a JSON object with the tool's fields, got " + kindOf(data)
	var arr []json.RawMessage
	if json.Unmarshal(data, &arr) == nil && len(arr) == 1 && bytes.HasPrefix(trimJSON(arr[0]), []byte("{")) {
		msg += "; send the object itself, not inside an array"
	}
	return msg
}

// kindOf names the kind of a valid JSON value for a message.
func kindOf(data []byte) string {
	switch data[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// ---- Syntax errors ----

// syntaxProblem says what is wrong with data, which is not valid JSON, and
// where (the byte offset, counted from 0, and an excerpt): the common
// breaks of small models by name, anything else in the decoder's words. It
// only reports: a guessed repair could run a tool with something the model
// did not mean.
func syntaxProblem(data []byte) string {
	// The decoder tells a cut-off input apart from a broken one.
	var raw json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&raw); errors.Is(err, io.ErrUnexpectedEOF) {
		return truncated(data)
	}
	var synErr *json.SyntaxError
	if err := json.Unmarshal(data, &raw); !errors.As(err, &synErr) || synErr.Offset < 1 || synErr.Offset > int64(len(data)) {
		return fmt.Sprintf("%v", err)
	}
	// Offset counts the bytes read up to and including the bad one.
	p := int(synErr.Offset) - 1
	s := scanPrefix(data[:p])
	c := data[p]
	where := fmt.Sprintf(" (offset %d, near %s)", p, excerpt(data, p))
	switch {
	case s.inString && s.escaped:
		return fmt.Sprintf(`\%c is not a JSON escape: inside strings use only \" \\ \/ \b \f \n \r \t \uXXXX (write %c without the backslash)`, c, c) + where
	case s.inString && c < 0x20:
		return "escape " + controlName(c) + " inside a string" + where
	case s.inString:
		return synErr.Error() + where
	case len(s.stack) == 0 && s.expect == expectValue:
		return "they must be a JSON object starting with {, got " + excerpt(data, 0)
	case c == '/':
		return "JSON has no comments: remove them" + where
	case c == '\'':
		return "use double quotes for keys and strings, not single quotes" + where
	case s.expect == expectNothing:
		return "extra text after the JSON object: send exactly one object" + where
	}
	top := s.stack[len(s.stack)-1]
	word := wordAt(data, p)
	if s.bare {
		// A value that began like a number or true/false/null and went
		// wrong: look at the whole word.
		word = wordAt(data, s.bareStart)
		if word == "" || !isWordStart(word[0]) {
			return synErr.Error() + where
		}
		return bareValue(word) + where
	}
	switch s.expect {
	case expectKey:
		switch {
		case c == '}':
			return "remove the trailing comma after " + s.lastMember(data) + fmt.Sprintf(" (offset %d)", s.lastComma)
		case isWordStart(c):
			return fmt.Sprintf("put the key %s in double quotes: %s", word, quote(word)) + where
		}
	case expectValue:
		switch {
		case c == ']' && top == '[':
			return "remove the trailing comma after " + s.lastMember(data) + fmt.Sprintf(" (offset %d)", s.lastComma)
		case c == '}' && top == '{':
			return fmt.Sprintf("the field %s has no value: give it one or leave the field out", quote(s.lastKey)) + where
		case isWordStart(c):
			return bareValue(word) + where
		}
	case expectColon:
		return fmt.Sprintf("put a colon after the key %s", quote(s.lastKey)) + where
	case expectCommaOrClose:
		closer := "}"
		if top == '[' {
			closer = "]"
		}
		return fmt.Sprintf(`expected "," or %q here: add the missing comma, or escape a double quote inside the string before it as \"`, closer) + where
	}
	return synErr.Error() + where
}

// bareValue explains an unquoted word where a value should be.
func bareValue(word string) string {
	switch word {
	case "True", "False", "None":
		return "use JSON's true, false and null (lowercase), not Python's " + word
	case "NaN", "Infinity", "undefined":
		return word + " is not JSON: use null or a number"
	}
	return fmt.Sprintf("put the string value in double quotes: %s, not %s", quote(word), word)
}

// truncated explains input that ends before its JSON does.
func truncated(data []byte) string {
	s := scanPrefix(data)
	var what []string
	if s.inString {
		what = append(what, "the last string is not closed")
	} else if s.expect == expectValue && len(s.stack) > 0 && s.stack[len(s.stack)-1] == '{' {
		what = append(what, fmt.Sprintf("the field %s has no value", quote(s.lastKey)))
	}
	if len(s.stack) > 0 {
		closers := make([]byte, 0, len(s.stack))
		for i := len(s.stack) - 1; i >= 0; i-- {
			if s.stack[i] == '{' {
				closers = append(closers, '}')
			} else {
				closers = append(closers, ']')
			}
		}
		what = append(what, fmt.Sprintf("the closing %s is missing", quote(string(closers))))
	}
	msg := "they end too early (cut off?)"
	if len(what) > 0 {
		msg += ": " + strings.Join(what, " and ")
	}
	return msg + ". Send the complete object"
}

// What a JSON scanner expects next.
const (
	expectValue        = iota // a value: at the start, after ':' or '[' or ',' in an array
	expectKey                 // a key or '}': after '{' or ',' in an object
	expectColon               // ':' after a key
	expectCommaOrClose        // ',' or the closing bracket after a value
	expectNothing             // the top-level value is complete
)

// scanState is where a scan of a JSON prefix stopped. The prefix must be
// valid as far as it goes (the decoder found the error after it), so the
// scan only follows structure; it does not validate.
type scanState struct {
	stack     []byte // '{' or '[' for each open container
	expect    int
	inString  bool
	escaped   bool // inside a string, right after a backslash
	bare      bool // inside a number or true/false/null
	bareStart int
	isKey     bool   // the open string is a key
	lastKey   string // the last complete key
	keyStart  int
	// memberStart[i] is where the current member of container i begins and
	// prevStart[i] where the one before the last comma began.
	memberStart []int
	prevStart   []int
	lastComma   int
}

func scanPrefix(prefix []byte) *scanState {
	s := &scanState{expect: expectValue}
	for i := 0; i < len(prefix); i++ {
		b := prefix[i]
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case b == '\\':
				s.escaped = true
			case b == '"':
				s.inString = false
				if s.isKey {
					var k string
					if json.Unmarshal(prefix[s.keyStart:i+1], &k) == nil {
						s.lastKey = k
					}
					s.expect = expectColon
				} else {
					s.valueDone()
				}
			}
			continue
		}
		if s.bare {
			if isWordByte(b) || b == '+' {
				continue
			}
			s.bare = false
			s.valueDone()
		}
		switch b {
		case ' ', '\t', '\n', '\r':
		case '{', '[':
			s.stack = append(s.stack, b)
			s.memberStart = append(s.memberStart, i+1)
			s.prevStart = append(s.prevStart, i+1)
			s.expect = expectValue
			if b == '{' {
				s.expect = expectKey
			}
		case '}', ']':
			if n := len(s.stack); n > 0 {
				s.stack = s.stack[:n-1]
				s.memberStart = s.memberStart[:n-1]
				s.prevStart = s.prevStart[:n-1]
			}
			s.valueDone()
		case ',':
			if n := len(s.stack); n > 0 {
				s.prevStart[n-1] = s.memberStart[n-1]
				s.memberStart[n-1] = i + 1
				s.expect = expectValue
				if s.stack[n-1] == '{' {
					s.expect = expectKey
				}
			}
			s.lastComma = i
		case ':':
			s.expect = expectValue
		case '"':
			s.inString, s.isKey, s.keyStart = true, s.expect == expectKey, i
		default:
			s.bare, s.bareStart = true, i
		}
	}
	return s
}

// valueDone moves on after a complete value.
func (s *scanState) valueDone() {
	if len(s.stack) == 0 {
		s.expect = expectNothing
	} else {
		s.expect = expectCommaOrClose
	}
}

// lastMember is the text of the member before the last comma, shortened.
func (s *scanState) lastMember(data []byte) string {
	start := 0
	if n := len(s.prevStart); n > 0 {
		start = s.prevStart[n-1]
	}
	if start > s.lastComma {
		start = s.lastComma
	}
	return shorten(oneLine(string(bytes.TrimSpace(data[start:s.lastComma]))), 40)
}

// isWordStart reports whether b can start an unquoted word.
func isWordStart(b byte) bool {
	return b == '_' || b == '$' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

// isWordByte reports whether b can continue an unquoted word or number.
func isWordByte(b byte) bool {
	return isWordStart(b) || b >= '0' && b <= '9' || b == '.' || b == '-'
}

// wordAt returns the unquoted word starting at i (letters, digits, '_',
// '.', '-', '/'), at most 40 bytes.
func wordAt(data []byte, i int) string {
	j := i
	for j < len(data) && j-i < 40 && (isWordByte(data[j]) || data[j] == '/') {
		j++
	}
	return strings.ToValidUTF8(string(data[i:j]), "")
}

// controlName names a control character found inside a string.
func controlName(c byte) string {
	switch c {
	case '\n':
		return `line breaks as \n`
	case '\r':
		return `carriage returns as \r`
	case '\t':
		return `tabs as \t`
	}
	return fmt.Sprintf(`the control character %#02x as \u%04x`, c, c)
}

// excerpt shows the input around offset p, in backquotes, with line breaks
// and tabs made visible.
func excerpt(data []byte, p int) string {
	start, end := max(0, p-24), min(len(data), p+16)
	for start > 0 && !utf8.RuneStart(data[start]) {
		start--
	}
	for end < len(data) && !utf8.RuneStart(data[end]) {
		end++
	}
	text := oneLine(strings.ToValidUTF8(string(data[start:end]), "?"))
	if start > 0 {
		text = "…" + text
	}
	if end < len(data) {
		text += "…"
	}
	return "`" + text + "`"
}

// oneLine makes line breaks and tabs visible as escapes and other control
// characters spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' {
			return ' '
		}
		return r
	}, strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s))
}

// ---- Schemas ----

// schemaNode is the part of a JSON Schema CheckArgs understands. A nil node
// accepts anything.
type schemaNode struct {
	types    []string // allowed JSON types; none: any
	nullable bool     // OpenAPI's "nullable": true also allows null
	desc     string
	enum     []enumValue
	min, max *float64

	// Objects.
	hasProps bool       // the schema has a "properties" keyword
	props    []property // in the schema's order
	required []string
	closed   bool        // "additionalProperties": false
	extra    *schemaNode // "additionalProperties" as a schema

	// Arrays.
	items *schemaNode
}

type property struct {
	name string
	node *schemaNode
}

type enumValue struct {
	v    any    // decoded as decodeValue does
	text string // compact JSON, for messages
}

// knownTypes are JSON Schema's type names.
var knownTypes = map[string]bool{"object": true, "array": true, "string": true, "integer": true, "number": true, "boolean": true, "null": true}

// parseSchema reads a tool's parameter schema. Anything it cannot read (not
// JSON, not an object) gives an empty node, which accepts any object.
func parseSchema(raw json.RawMessage) *schemaNode {
	n := parseNode(raw, 0)
	if n == nil {
		n = &schemaNode{}
	}
	return n
}

// parseNode reads one schema object; each keyword is read on its own and
// skipped when it is malformed. depth bounds the recursion.
func parseNode(raw json.RawMessage, depth int) *schemaNode {
	var kw map[string]json.RawMessage
	if depth > 32 || json.Unmarshal(raw, &kw) != nil || kw == nil {
		return nil
	}
	n := &schemaNode{}
	if t, ok := kw["type"]; ok {
		var one string
		var list []string
		if json.Unmarshal(t, &one) == nil {
			list = []string{one}
		} else if json.Unmarshal(t, &list) != nil {
			list = nil
		}
		for _, name := range list {
			if !knownTypes[name] {
				list = nil // a type we do not know: accept anything
				break
			}
		}
		n.types = list
	}
	_ = json.Unmarshal(kw["nullable"], &n.nullable)
	_ = json.Unmarshal(kw["description"], &n.desc)
	var enum []json.RawMessage
	if json.Unmarshal(kw["enum"], &enum) == nil {
		for _, e := range enum {
			v, err := decodeValue(e)
			if err != nil {
				continue
			}
			var buf bytes.Buffer
			if json.Compact(&buf, e) != nil {
				continue
			}
			n.enum = append(n.enum, enumValue{v: v, text: buf.String()})
		}
	}
	n.min = number(kw["minimum"])
	n.max = number(kw["maximum"])
	if p, ok := kw["properties"]; ok {
		n.props, n.hasProps = parseProperties(p, depth), true
	}
	var required []string
	if json.Unmarshal(kw["required"], &required) == nil {
		n.required = required
	}
	if ap, ok := kw["additionalProperties"]; ok {
		var b bool
		if json.Unmarshal(ap, &b) == nil {
			n.closed = !b
		} else {
			n.extra = parseNode(ap, depth+1)
		}
	}
	if it, ok := kw["items"]; ok {
		n.items = parseNode(it, depth+1) // the old tuple form (a list) gives nil: not checked
	}
	return n
}

// parseProperties reads "properties" keeping the schema's order, which is
// the order the expected shape lists them in.
func parseProperties(raw json.RawMessage, depth int) []property {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var props []property
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return props
		}
		name, _ := t.(string)
		var sub json.RawMessage
		if dec.Decode(&sub) != nil {
			return props
		}
		props = append(props, property{name: name, node: parseNode(sub, depth+1)})
	}
	return props
}

// number reads a numeric keyword, or nil.
func number(raw json.RawMessage) *float64 {
	var f float64
	if raw == nil || json.Unmarshal(raw, &f) != nil {
		return nil
	}
	return &f
}

func (n *schemaNode) prop(name string) (*schemaNode, bool) {
	for _, p := range n.props {
		if p.name == name {
			return p.node, true
		}
	}
	return nil, false
}

func (n *schemaNode) isRequired(name string) bool {
	for _, r := range n.required {
		if r == name {
			return true
		}
	}
	return false
}

// ---- Values ----

// Decoded arguments: *object, []any, string, json.Number, bool or nil.
// Objects keep their members in order, so problems are listed in the order
// the model wrote them.
type object struct {
	members []member
}

type member struct {
	key string
	val any
}

func (o *object) has(key string) bool {
	for _, m := range o.members {
		if m.key == key {
			return true
		}
	}
	return false
}

// decodeValue decodes one JSON value, numbers as json.Number.
func decodeValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return readValue(dec)
}

func readValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &object{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			o.members = append(o.members, member{key, v})
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return t, nil
}

// isInteger reports whether a JSON number has no fractional part (3.0 and
// 1e3 are integers, 3.5 is not).
func isInteger(n json.Number) bool {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		return true
	}
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f == math.Trunc(f)
}

// equal compares decoded values; numbers by value, objects regardless of
// member order.
func equal(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		fa, errA := strconv.ParseFloat(string(a), 64)
		fb, errB := strconv.ParseFloat(string(b), 64)
		if errA != nil || errB != nil {
			return a == b
		}
		return fa == fb
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case *object:
		b, ok := b.(*object)
		if !ok || len(a.members) != len(b.members) {
			return false
		}
		for _, ma := range a.members {
			found := false
			for _, mb := range b.members {
				if ma.key == mb.key && equal(ma.val, mb.val) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	return a == b
}

// ---- Validation ----

// checker collects the problems of one set of arguments.
type checker struct {
	problems []string
	more     int // problems past maxProblems
}

func (c *checker) add(format string, a ...any) {
	if len(c.problems) >= maxProblems {
		c.more++
		return
	}
	c.problems = append(c.problems, fmt.Sprintf(format, a...))
}

func (c *checker) lines() []string {
	if c.more > 0 {
		return append(c.problems, fmt.Sprintf("(and %d more problems like these)", c.more))
	}
	return c.problems
}

// value checks v against n at path (a field path like items[2].name).
// optional tells whether the field may be left out.
func (c *checker) value(n *schemaNode, v any, path string, optional bool) {
	if n == nil {
		return
	}
	if !n.typeOK(v) {
		if tolerated(n, v, optional) {
			return
		}
		msg := fmt.Sprintf("field %s must be %s, got %s", quote(path), typePhrase(n.types), describe(v))
		c.add("%s", msg)
		return
	}
	if len(n.enum) > 0 && !n.inEnum(v) {
		msg := fmt.Sprintf("field %s must be one of %s, got %s", quote(path), enumList(n.enum, ", "), describe(v))
		if s, ok := v.(string); ok {
			var names []string
			for _, e := range n.enum {
				if es, ok := e.v.(string); ok {
					names = append(names, es)
				}
			}
			if near := NearestName(s, names); near != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", quote(near))
			}
		}
		c.add("%s", msg)
		return
	}
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return
		}
		if n.min != nil && f < *n.min {
			c.add("field %s must be at least %v, got %s", quote(path), *n.min, v)
		}
		if n.max != nil && f > *n.max {
			c.add("field %s must be at most %v, got %s", quote(path), *n.max, v)
		}
	case *object:
		c.object(n, v, path)
	case []any:
		for i, e := range v {
			c.value(n.items, e, fmt.Sprintf("%s[%d]", path, i), false)
		}
	}
}

// tolerated reports whether a value of the wrong type is one the tools
// take anyway, so refusing it would only cost the model a turn: null in
// an optional field (read as left out), and a number written as a string
// ("30") for a number field (the tools read both spellings). The model's
// own spelling is kept: nothing is rewritten.
func tolerated(n *schemaNode, v any, optional bool) bool {
	switch v := v.(type) {
	case nil:
		return optional
	case string:
		num := json.Number(strings.TrimSpace(v))
		if _, err := strconv.ParseFloat(string(num), 64); err != nil {
			return false
		}
		probe := *n
		probe.enum = nil
		return probe.typeOK(num)
	}
	return false
}

// object checks an object's members against n: required fields, each
// known field's value, and unknown fields when n forbids or constrains
// them.
func (c *checker) object(n *schemaNode, o *object, path string) {
	var missing []string
	for _, r := range n.required {
		if !o.has(r) {
			missing = append(missing, r)
		}
	}
	// Unknown members already explained (as a wrapper or a misspelling of
	// a missing field) are not reported again.
	explained := map[string]bool{}
	if path == "" && len(missing) > 0 {
		missing = c.wrapped(o, n, missing, explained)
	}
	names := make([]string, len(n.props))
	for i, p := range n.props {
		names[i] = p.name
	}
	for _, r := range missing {
		msg := "missing required field " + quote(join(path, r))
		if p, _ := n.prop(r); p != nil {
			msg += fieldHint(p)
		}
		for _, m := range o.members {
			if _, known := n.prop(m.key); !known && !explained[m.key] && NearestName(m.key, names) == r {
				msg += fmt.Sprintf("; you sent %s: rename it to %s", quote(m.key), quote(r))
				explained[m.key] = true
				break
			}
		}
		c.add("%s", msg)
	}
	for _, m := range o.members {
		if p, known := n.prop(m.key); known {
			c.value(p, m.val, join(path, m.key), !n.isRequired(m.key))
			continue
		}
		switch {
		case explained[m.key]:
		case n.closed:
			msg := "unknown field " + quote(join(path, m.key))
			if near := NearestName(m.key, names); near != "" {
				msg += fmt.Sprintf(": did you mean %s?", quote(near))
			} else {
				msg += ": remove it"
			}
			c.add("%s", msg)
		case n.extra != nil:
			c.value(n.extra, m.val, join(path, m.key), true)
		}
	}
}

// wrapped spots the required fields sent inside a wrapper object
// ({"arguments": {"goal": ...}}), reports the wrapper once, and returns
// the fields still missing.
func (c *checker) wrapped(o *object, n *schemaNode, missing []string, explained map[string]bool) []string {
	for _, m := range o.members {
		inner, ok := m.val.(*object)
		if _, known := n.prop(m.key); known || !ok {
			continue
		}
		var still []string
		for _, r := range missing {
			if !inner.has(r) {
				still = append(still, r)
			}
		}
		if len(still) < len(missing) {
			c.add("the fields are wrapped in %s: put them at the top level", quote(m.key))
			explained[m.key] = true
			return still
		}
	}
	return missing
}

// join extends a field path with a key.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (n *schemaNode) typeOK(v any) bool {
	if len(n.types) == 0 || v == nil && n.nullable {
		return true
	}
	for _, t := range n.types {
		switch v := v.(type) {
		case nil:
			if t == "null" {
				return true
			}
		case bool:
			if t == "boolean" {
				return true
			}
		case string:
			if t == "string" {
				return true
			}
		case json.Number:
			if t == "number" || t == "integer" && isInteger(v) {
				return true
			}
		case []any:
			if t == "array" {
				return true
			}
		case *object:
			if t == "object" {
				return true
			}
		}
	}
	return false
}

func (n *schemaNode) inEnum(v any) bool {
	for _, e := range n.enum {
		if equal(e.v, v) {
			return true
		}
	}
	return false
}

// ---- Messages ----

// typePhrase says what types a value may have: "an integer", "a string or
// null".
func typePhrase(types []string) string {
	words := make([]string, len(types))
	for i, t := range types {
		switch t {
		case "integer", "array", "object":
			words[i] = "an " + t
		case "null":
			words[i] = "null"
		default:
			words[i] = "a " + t
		}
	}
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// describe names a decoded value for "got ...": `string "30"`, `number
// 3.5`, `an array`.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case string:
		return "string " + quote(shorten(v, 40))
	case json.Number:
		return "number " + shorten(string(v), 40)
	case []any:
		return "an array"
	}
	return "an object"
}

// enumList renders at most 8 enum values as JSON, joined by sep.
func enumList(enum []enumValue, sep string) string {
	var parts []string
	for i, e := range enum {
		if i == 8 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, shorten(e.text, 40))
	}
	return strings.Join(parts, sep)
}

// fieldHint tells what a missing field holds: " (string: the complete goal
// for the chick…)".
func fieldHint(n *schemaNode) string {
	shape, desc := shapeOf(n, 1), shorten(oneLine(strings.Join(strings.Fields(n.desc), " ")), 60)
	switch {
	case shape == "any" && desc == "":
		return ""
	case shape == "any":
		return " (" + desc + ")"
	case desc == "":
		return " (" + shape + ")"
	}
	return " (" + shape + ": " + desc + ")"
}

// rootShape restates the shape the arguments should have.
func rootShape(n *schemaNode) string {
	if !n.hasProps && len(n.required) == 0 {
		return "a JSON object"
	}
	return objectShape(n, 0)
}

// objectShape renders an object schema compactly: {"goal": string
// (required), "tier": "small"|"big"}, required fields first, at most 12.
func objectShape(n *schemaNode, depth int) string {
	var parts []string
	seen := map[string]bool{}
	for _, r := range n.required {
		if seen[r] {
			continue
		}
		seen[r] = true
		p, _ := n.prop(r)
		parts = append(parts, quote(r)+": "+shapeOf(p, depth+1)+" (required)")
	}
	for _, p := range n.props {
		if !seen[p.name] {
			seen[p.name] = true
			parts = append(parts, quote(p.name)+": "+shapeOf(p.node, depth+1))
		}
	}
	if len(parts) > 12 {
		parts = append(parts[:12], "…")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// shapeOf renders a value's schema: a type, an enum, a nested object (two
// levels deep at most; an array is no level) or an array of something.
func shapeOf(n *schemaNode, depth int) string {
	if n == nil {
		return "any"
	}
	if len(n.enum) > 0 {
		return enumList(n.enum, "|")
	}
	only := func(t string) bool { return len(n.types) == 1 && n.types[0] == t }
	switch {
	case n.hasProps && (len(n.types) == 0 || only("object")):
		if depth >= 2 || len(n.props) == 0 {
			return "object"
		}
		return objectShape(n, depth)
	case only("array"):
		if n.items == nil {
			return "array"
		}
		return "array of " + shapeOf(n.items, depth)
	case len(n.types) == 0:
		return "any"
	}
	return strings.Join(n.types, "|")
}

// quote writes s as a JSON string (without escaping <, > and &).
func quote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// shorten shortens s to at most n runes, ending in "…" when cut (at a space
// when one is near).
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n]
	cut := string(r)
	if i := strings.LastIndexByte(cut, ' '); i > len(cut)/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,;:") + "…"
}
