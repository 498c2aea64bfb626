package recalldata

import "fmt"

// RecallAt measures a search over qs: each question's text is given to
// search with k, and a question is found when its Answer is among the
// first k ids returned (ids past the k-th do not count). It returns the
// fraction of questions found and the questions missed, in qs's order; a
// search error stops it and is returned, naming the question.
func RecallAt(k int, qs []Question, search func(q string, k int) ([]string, error)) (float64, []Question, error) {
	if k < 1 {
		return 0, nil, fmt.Errorf("recall at %d: k must be at least 1", k)
	}
	if len(qs) == 0 {
		return 0, nil, fmt.Errorf("recall at %d: no questions", k)
	}
	var missed []Question
	for _, q := range qs {
		ids, err := search(q.Text, k)
		if err != nil {
			return 0, nil, fmt.Errorf("search %q: %w", q.Text, err)
		}
		found := false
		for i, id := range ids {
			if i >= k {
				break
			}
			if id == q.Answer {
				found = true
				break
			}
		}
		if !found {
			missed = append(missed, q)
		}
	}
	return float64(len(qs)-len(missed)) / float64(len(qs)), missed, nil
}
