package statuspage

import (
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
)

// RecentRefusals is how many refusals the page lists.
const RecentRefusals = 10

// Role is one role given on an adapter or channel (the roles table).
type Role struct {
	Where string `json:"where"`
	Role  string `json:"role"`
	Who   string `json:"who"`
	May   string `json:"may"`
}

// Refusal is one permission a person was refused.
type Refusal struct {
	At       time.Time `json:"at"`
	Where    string    `json:"where"`
	User     string    `json:"user"`
	Perm     string    `json:"perm"`
	Sentence string    `json:"sentence"`
}

// roles fills the roles and the latest refusals (newest first) from src.
func roles(src chat.Roles, s func(string) string) ([]Role, []Refusal) {
	rs, fs := []Role{}, []Refusal{}
	if src == nil {
		return rs, fs
	}
	for _, a := range src.RoleAssignments() {
		where := a.Adapter
		if a.Channel != "" {
			where += "/" + a.Channel
		}
		may := strings.Join(a.May, " ")
		if may == "" {
			may = "nothing"
		}
		rs = append(rs, Role{Where: s(where), Role: s(a.Role), Who: s(strings.Join(a.Who, ", ")), May: s(may)})
	}
	all := src.RecentRefusals()
	for i := len(all) - 1; i >= 0 && len(fs) < RecentRefusals; i-- {
		f := all[i]
		fs = append(fs, Refusal{At: f.Time, Where: s(f.Adapter + "/" + f.Channel), User: s(f.User), Perm: s(f.Perm), Sentence: s(f.Sentence)})
	}
	return rs, fs
}
