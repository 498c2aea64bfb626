package nest_test

import (
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/chick"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		must(t, os.WriteFile(p, []byte(content), 0o600))
	}
}

// TestFetchFiles: a chick's files over the real nest (TLS on loopback,
// the chick's real token), received by the chick's own receiver: its
// channel's memory, attachments and skills, the workspace's shared skills
// (a channel skill of the same name wins), nothing else; a large file in
// several chunks, none over wire.FetchChunkBytes. Another chick's token
// gets nothing.
func TestFetchFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	data := t.TempDir()
	ch := filepath.Join(data, "channels", "cli", "local")
	big := make([]byte, 1<<20+17)
	rand.Read(big)
	writeTree(t, ch, map[string]string{
		"MEMORY.md": "channel memory", "attachments/a.txt": "attached", "attachments/big.bin": string(big),
		"skills/greet/SKILL.md": "channel greet", "log.jsonl": `{"secret":"log"}` + "\n", "scratch/notes.txt": "notes",
	})
	secret := filepath.Join(data, "config.json")
	must(t, os.WriteFile(secret, []byte(`{"apiKey":"sk-very-secret"}`), 0o600))
	must(t, os.Symlink(secret, filepath.Join(ch, "scratch", "link-to-config")))
	shared := filepath.Join(data, "skills")
	writeTree(t, shared, map[string]string{"greet/SKILL.md": "workspace greet", "greet/only-shared.txt": "x", "shared-only/SKILL.md": "shared"})
	writeTree(t, filepath.Join(data, "channels", "cli", "other"), map[string]string{"MEMORY.md": "other channel"})

	id, tok := f.spawnFiles(t, hatchery.Files{ChannelDir: ch, SharedSkills: shared})
	other, otherTok := f.spawn(t)
	ctx := wire.Credentials(t.Context(), id, tok)
	stream, err := f.client.FetchFiles(ctx, &pb.FetchFilesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs, chunks, biggest int
	recv := func() (*pb.FetchFilesResponse, error) {
		m, err := stream.Recv()
		if err == nil {
			msgs++
			if d := m.GetData(); d != nil {
				chunks++
				biggest = max(biggest, len(d))
			}
		}
		return m, err
	}
	ws := t.TempDir()
	got, err := chick.ReceiveFiles(ws, recv)
	if err != nil {
		t.Fatalf("ReceiveFiles: %v", err)
	}
	if biggest > wire.FetchChunkBytes || chunks < len(big)/wire.FetchChunkBytes+1 {
		t.Errorf("%d data messages, the largest %d bytes: want the %d-byte file in chunks of at most %d", chunks, biggest, len(big), wire.FetchChunkBytes)
	}
	files := map[string]string{}
	err = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		b, err := os.ReadFile(p)
		files[rel] = string(b)
		return err
	})
	must(t, err)
	want := map[string]string{
		"MEMORY.md":                   "channel memory",
		"attachments/a.txt":           "attached",
		"attachments/big.bin":         string(big),
		"skills/greet/SKILL.md":       "channel greet",
		"skills/shared-only/SKILL.md": "shared",
		"scratch/notes.txt":           "notes",
	}
	for name, content := range want {
		if files[name] != content {
			t.Errorf("%s in the workspace: %d bytes, want %q (%d bytes)", name, len(files[name]), content[:min(len(content), 40)], len(content))
		}
	}
	for name, content := range files {
		if _, ok := want[name]; !ok {
			t.Errorf("the chick received %s (%q): nothing beyond the channel's memory, attachments, scratch and skills, and the shared skills it has none of", name, content[:min(len(content), 40)])
		}
	}
	if got.Files != int64(len(want)) || got.Bytes != int64(len(big)+len("channel memory")+len("attached")+len("channel greet")+len("shared")+len("notes")) {
		t.Errorf("received %+v", got)
	}
	for _, d := range []string{"outputs", "scratch", "skills", "attachments"} {
		if st, err := os.Stat(filepath.Join(ws, d)); err != nil || !st.IsDir() {
			t.Errorf("%s/ not made: %v", d, err)
		}
	}

	// Tokens: another chick's, a made-up one, none.
	for name, c := range map[string][2]string{
		"another chick's token": {id, otherTok},
		"its token for another": {other, tok},
		"made-up token":         {id, strings.Repeat("0", 64)},
		"no token":              {id, ""},
	} {
		s, err := f.client.FetchFiles(wire.Credentials(t.Context(), c[0], c[1]), &pb.FetchFilesRequest{})
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, err)
		}
	}
}
