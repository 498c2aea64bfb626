package main

import (
	"github.com/mother-chat/mother/pkg/agent"
)

// chickTools is the chick's tool set. The tools themselves (bash, read,
// write, edit, attach) come from pkg/tools (the agent-core issue); until
// that package is on main the chick runs its loop without tools.
func chickTools(root string, attach func(path, title string) error) []agent.Tool {
	_ = root
	_ = attach
	return nil
}
