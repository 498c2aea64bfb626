package main

import (
	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/tools"
)

// chickTools is the chick's full tool set (bash, read, write, edit,
// attach) confined to its workspace; attach hands files to Mother.
func chickTools(root string, attach func(path, title string) error) ([]agent.Tool, error) {
	return tools.Chick(root, attach)
}
