package nest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/skills"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// contribDesk records what reaches Mother's side.
type contribDesk struct {
	mu       sync.Mutex
	proposed []skills.Proposal
	memory   []string
	chick    string
}

func (d *contribDesk) ProposeSkill(_ context.Context, in hatchery.Info, p skills.Proposal) (bool, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.proposed, d.chick = append(d.proposed, p), in.ID
	_, err := skills.Validate(p)
	if err != nil {
		return false, "refused: " + err.Error(), nil
	}
	return true, "added", nil
}

func (d *contribDesk) UpdateChickMemory(_ context.Context, in hatchery.Info, mode, content string) (bool, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.memory, d.chick = append(d.memory, mode+":"+content), in.ID
	return true, "updated", nil
}

// TestContributionsReachMother: ProposeSkill and UpdateMemory carry what
// the chick sent (entry kinds included) to Mother for the calling chick;
// without Mother they are Unavailable, after the chick's end refused.
func TestContributionsReachMother(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	id, tok := f.spawn(t)
	ctx := wire.Credentials(t.Context(), id, tok)
	md := "---\nname: w\ndescription: d\n---\n"
	req := &pb.ProposeSkillRequest{Name: "w", Entries: []*pb.SkillEntry{
		{Path: "SKILL.md", Kind: pb.SkillEntryKind_SKILL_ENTRY_KIND_FILE, Size: int64(len(md)), Data: []byte(md)},
		{Path: "bin", Kind: pb.SkillEntryKind_SKILL_ENTRY_KIND_DIR},
		{Path: "bin/run", Kind: pb.SkillEntryKind_SKILL_ENTRY_KIND_FILE, Size: 2, Data: []byte("hi"), Executable: true},
	}}
	if _, err := f.client.ProposeSkill(ctx, req); status.Code(err) != codes.Unavailable {
		t.Errorf("ProposeSkill without Mother: %v, want Unavailable", err)
	}
	d := &contribDesk{}
	f.srv.SetContributions(d)
	resp, err := f.client.ProposeSkill(ctx, req)
	if err != nil || !resp.GetAccepted() {
		t.Fatalf("ProposeSkill = %v, %v", resp, err)
	}
	got := d.proposed[0]
	if d.chick != id || got.Name != "w" || len(got.Entries) != 3 || got.Entries[1].Kind != skills.KindDir || !got.Entries[2].Executable || string(got.Entries[2].Data) != "hi" {
		t.Errorf("Mother got %+v from %s", got, d.chick)
	}
	req.Entries = append(req.Entries, &pb.SkillEntry{Path: "dev", Kind: pb.SkillEntryKind_SKILL_ENTRY_KIND_OTHER})
	if resp, err := f.client.ProposeSkill(ctx, req); err != nil || resp.GetAccepted() || resp.GetMessage() != "refused: dev is a device, pipe or socket: a skill holds only files and directories" {
		t.Errorf("ProposeSkill(with a device) = %v, %v; want a refusal with the reason", resp, err)
	}

	if _, err := f.client.UpdateMemory(ctx, &pb.UpdateMemoryRequest{Content: "x"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("UpdateMemory without a mode: %v, want InvalidArgument", err)
	}
	if resp, err := f.client.UpdateMemory(ctx, &pb.UpdateMemoryRequest{Mode: pb.MemoryMode_MEMORY_MODE_REPLACE, Content: "fact"}); err != nil || !resp.GetUpdated() || d.memory[0] != "replace:fact" {
		t.Errorf("UpdateMemory = %v, %v (Mother got %q)", resp, err, d.memory)
	}

	if err := f.h.Finish(id, hatchery.Result{Text: "done"}); err != nil {
		t.Fatal(err)
	}
	ended, _ := f.h.Ended(id)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the chick did not end")
	}
	if _, err := f.client.UpdateMemory(ctx, &pb.UpdateMemoryRequest{Mode: pb.MemoryMode_MEMORY_MODE_APPEND, Content: "late"}); err == nil {
		t.Errorf("UpdateMemory after the chick's end succeeded")
	}
	if len(d.memory) != 1 {
		t.Errorf("Mother heard %d memory updates, want 1", len(d.memory))
	}
}
