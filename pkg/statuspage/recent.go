package statuspage

import (
	"sort"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery"
)

// RecentChicks is how many ended chicks the page lists, newest first. The
// hatchery remembers more (hatchery.MaxRemembered); momctl chicks ls
// --all lists them all.
const RecentChicks = 50

// maxOutcome bounds an ended chick's outcome as the page shows it.
const maxOutcome = 300

// RecentChick is a chick that has ended: how and why, and what it cost.
type RecentChick struct {
	ID      string `json:"id"`
	Channel string `json:"channel"`
	Tier    string `json:"tier"`
	Host    string `json:"host,omitempty"`
	// State is its final state: done, failed or killed.
	State string `json:"state"`
	// Reason is why it ended, as a word (hatchery.Reason: done, error,
	// killed, hung, timeout, budget, no_start, ...).
	Reason string `json:"reason,omitempty"`
	// Outcome says it in a sentence: "killed by the operator", "timed out
	// after 10m0s", "could not start: ...".
	Outcome   string     `json:"outcome,omitempty"`
	Tokens    int64      `json:"tokens"`
	CreatedAt time.Time  `json:"createdAt"`
	StartedAt *time.Time `json:"startedAt,omitempty"`
	EndedAt   time.Time  `json:"endedAt"`
	// DurationSeconds is from when it got a slot to its end, or from its
	// creation for a chick that never got one (one killed in the queue).
	DurationSeconds float64 `json:"durationSeconds"`
}

// recentChicks picks the last RecentChicks ended chicks of list, newest
// first, their strings passed through s.
func recentChicks(list []hatchery.Info, s func(string) string) []RecentChick {
	var ended []hatchery.Info
	for _, in := range list {
		if in.State.Final() {
			ended = append(ended, in)
		}
	}
	sort.Slice(ended, func(i, j int) bool {
		a, b := ended[i], ended[j]
		if !a.EndedAt.Equal(b.EndedAt) {
			return a.EndedAt.After(b.EndedAt)
		}
		return a.ID < b.ID
	})
	out := make([]RecentChick, 0, min(len(ended), RecentChicks))
	for _, in := range ended[:min(len(ended), RecentChicks)] {
		from := in.StartedAt
		if from.IsZero() {
			from = in.CreatedAt
		}
		var took time.Duration
		if !in.EndedAt.IsZero() && !from.IsZero() {
			took = max(0, in.EndedAt.Sub(from)).Round(time.Millisecond)
		}
		outcome := strings.Join(strings.Fields(s(in.Outcome)), " ")
		if r := []rune(outcome); len(r) > maxOutcome {
			outcome = string(r[:maxOutcome-1]) + "…"
		}
		out = append(out, RecentChick{ID: in.ID, Channel: s(in.Channel), Tier: s(in.Tier), Host: s(in.Host), State: string(in.State),
			Reason: string(in.Reason), Outcome: outcome, Tokens: in.Usage.Total(), CreatedAt: in.CreatedAt, StartedAt: optTime(in.StartedAt),
			EndedAt: in.EndedAt, DurationSeconds: took.Seconds()})
	}
	return out
}

// took formats a duration in seconds as Age does, and one under a second
// as "<1s".
func took(seconds float64) string {
	if seconds < 1 {
		return "<1s"
	}
	return Age(time.Duration(seconds * float64(time.Second)))
}
