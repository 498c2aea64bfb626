package config

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Tokens is a token count. config.json may write it as a number
// (2000000) or as mother setup shows it: a string with a k, m or g suffix
// ("2m", "500k", "1.5m").
type Tokens int64

// Int64 is t as an int64.
func (t Tokens) Int64() int64 { return int64(t) }

// UnmarshalJSON takes a number or a string such as "2m".
func (t *Tokens) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		*t = Tokens(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a token count such as 2000000 or \"2m\", not %s", b)
	}
	v, err := ParseTokens(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParseTokens reads "2000000", "2m", "500k", "1.5m", "1g" (underscores
// and spaces ignored).
func ParseTokens(s string) (Tokens, error) {
	in := s
	s = strings.ToLower(strings.NewReplacer("_", "", " ", "").Replace(s))
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "g"):
		mult, s = 1e9, strings.TrimSuffix(s, "g")
	case strings.HasSuffix(s, "m"):
		mult, s = 1e6, strings.TrimSuffix(s, "m")
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f*mult > 9e18 {
		return 0, fmt.Errorf("%q is not a token count: write it like 2000000, \"2m\" or \"500k\"", in)
	}
	return Tokens(f * mult), nil
}
