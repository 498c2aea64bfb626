package chick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/skills"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// memoryTool is the chick's update_memory: it asks Mother to update the
// channel's MEMORY.md, within the budget Mother enforces.
type memoryTool struct{ r *runner }

var _ agent.Tool = (*memoryTool)(nil)

func (t *memoryTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "update_memory",
		Description: "Update your channel's memory (MEMORY.md, shown to Mother and every chick of the channel on every run; " +
			"you received a copy at start). mode \"append\" adds a line; \"replace\" rewrites the whole file (use it to shorten). " +
			"Mother refuses an update over the memory's budget and says why. Keep only durable facts the channel will need again.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
"label":{"type":"string","description":"A few words shown to the user while this runs"},
"mode":{"type":"string","enum":["append","replace"]},
"content":{"type":"string"}},"required":["mode","content"]}`),
	}
}

func (t *memoryTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		Mode    string `json:"mode"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("update_memory: invalid arguments: %v", err)
	}
	var mode pb.MemoryMode
	switch a.Mode {
	case "append":
		mode = pb.MemoryMode_MEMORY_MODE_APPEND
	case "replace":
		mode = pb.MemoryMode_MEMORY_MODE_REPLACE
	default:
		return agent.Result{}, fmt.Errorf("update_memory: mode: %q is not \"append\" or \"replace\"", a.Mode)
	}
	var resp *pb.UpdateMemoryResponse
	err := t.r.retry(ctx, "update memory", func(ctx context.Context) error {
		var err error
		resp, err = t.r.client.UpdateMemory(ctx, &pb.UpdateMemoryRequest{Mode: mode, Content: a.Content})
		return err
	})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			return agent.Result{}, fmt.Errorf("update_memory: %s", st.Message())
		}
		return agent.Result{}, fmt.Errorf("update_memory: %w", err)
	}
	if !resp.GetUpdated() {
		return agent.Result{Text: resp.GetMessage(), IsError: true}, nil
	}
	return agent.Result{Text: resp.GetMessage()}, nil
}

// proposeSkills offers Mother every skill under the workspace's skills/
// that differs from what the chick received (before). It returns the
// skills that did not reach Mother, with the reason (Mother posts her own
// refusals).
func (r *runner) proposeSkills(ctx context.Context, before map[string]string) []string {
	root := filepath.Join(r.opts.Workspace, "skills")
	var lines []string
	for _, name := range skills.Changed(before, skills.Snapshot(root)) {
		p, err := skills.Collect(filepath.Join(root, name))
		if err != nil {
			r.logger.Warn("skill not read", "skill", name, "err", err)
			lines = append(lines, fmt.Sprintf("skill %s not sent: %v", name, err))
			continue
		}
		req := &pb.ProposeSkillRequest{Name: name}
		for _, e := range p.Entries {
			req.Entries = append(req.Entries, &pb.SkillEntry{Path: e.Path, Kind: entryKind(e.Kind), Size: e.Size, Data: e.Data, Executable: e.Executable})
		}
		var resp *pb.ProposeSkillResponse
		err = r.retry(ctx, "propose skill", func(ctx context.Context) error {
			var err error
			resp, err = r.client.ProposeSkill(ctx, req)
			return err
		})
		if err != nil {
			msg := err.Error()
			if st, ok := status.FromError(err); ok {
				msg = st.Message()
			}
			r.logger.Warn("skill not sent", "skill", name, "err", err)
			lines = append(lines, fmt.Sprintf("skill %s not sent: %s", name, msg))
			if errors.Is(err, ErrRejected) {
				break
			}
			continue
		}
		r.logger.Info("skill proposed", "skill", name, "accepted", resp.GetAccepted(), "message", resp.GetMessage())
	}
	return lines
}

func entryKind(k skills.Kind) pb.SkillEntryKind {
	switch k {
	case skills.KindFile:
		return pb.SkillEntryKind_SKILL_ENTRY_KIND_FILE
	case skills.KindDir:
		return pb.SkillEntryKind_SKILL_ENTRY_KIND_DIR
	case skills.KindSymlink:
		return pb.SkillEntryKind_SKILL_ENTRY_KIND_SYMLINK
	}
	return pb.SkillEntryKind_SKILL_ENTRY_KIND_OTHER
}
