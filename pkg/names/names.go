// Package names finds the name a typo meant: the nearest of a list by
// edit distance, for "did you mean" hints (a tool's name or field for the
// model, a config field for the owner).
package names

import "strings"

// Nearest returns the name in names closest to name (edit distance,
// case-insensitive), or "" when none is close enough to be a plausible
// typo: at most max(2, len(name)/3) edits, and fewer edits than the shorter
// of the two has letters (so "ab" is not a typo of "cd"). Ties go to the
// earlier name.
func Nearest(name string, names []string) string {
	a := []rune(strings.ToLower(name))
	if len(a) == 0 {
		return ""
	}
	limit := max(2, len(a)/3)
	best, bestDist := "", limit+1
	for _, n := range names {
		b := []rune(strings.ToLower(n))
		if len(b) == 0 || abs(len(a)-len(b)) >= bestDist {
			continue
		}
		d := editDistance(a, b)
		if d < bestDist && d < min(len(a), len(b)) {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (insertions,
// deletions and substitutions, one edit each).
func editDistance(a, b []rune) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
