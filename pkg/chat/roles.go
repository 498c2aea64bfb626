package chat

import "time"

// RoleAssignment is one role given on an adapter (or one channel of it),
// as the config's roles table says (Mother.RoleAssignments), for momctl
// and the status page.
type RoleAssignment struct {
	Adapter string
	// Channel is empty for the whole adapter.
	Channel string
	Role    string
	// Who are user ids and platform references ("role:<id>"); "everyone"
	// for the default role.
	Who []string
	// May are the role's permissions.
	May []string
}

// Refusal is one permission a person was refused (Mother.RecentRefusals).
type Refusal struct {
	Time    time.Time
	Adapter string
	Channel string
	User    string
	// Perm is the permission ("chicks:hard", "tool:git.push").
	Perm string
	// Sentence is what the person and the model were told.
	Sentence string
}

// Roles reports who has which role and what was refused recently
// (Mother), for momctl and the status page.
type Roles interface {
	RoleAssignments() []RoleAssignment
	RecentRefusals() []Refusal
}
