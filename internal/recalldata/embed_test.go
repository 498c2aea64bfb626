package recalldata

import (
	"math"
	"testing"
)

func cosine(a, b []float32) float64 {
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	return dot
}

// Embed is deterministic, of unit length, and puts texts that say the
// same thing in other words closer than texts that share only words.
func TestRecallDataEmbed(t *testing.T) {
	for _, text := range []string{"the kitchen tap is leaking", "", "the of and", "Kowalski 42"} {
		a, b := Embed(text), Embed(text)
		if len(a) != Dims {
			t.Fatalf("%q: %d dimensions", text, len(a))
		}
		var sum float64
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%q: not deterministic at %d", text, i)
			}
			sum += float64(a[i]) * float64(a[i])
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("%q: length² %v", text, sum)
		}
	}
	for _, c := range []struct{ q, near, far string }{
		{"which plumber fixed the dripping faucet?", "Booked a plumbing firm for the leaking tap", "which car did we fix?"},
		{"when is the puppy's booster jab?", "the dog's vaccination is due in May", "when is the party?"},
		{"how often does the NAS backup run?", "the server snapshots now run nightly", "how often does the bin collection run?"},
	} {
		q := Embed(c.q)
		if n, f := cosine(q, Embed(c.near)), cosine(q, Embed(c.far)); n <= f {
			t.Errorf("%q: paraphrase %.3f, lexical distractor %.3f", c.q, n, f)
		}
	}
}
