package agent

import (
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
)

func img(n int) model.Image { return model.Image{MimeType: "image/png", Data: make([]byte, n)} }

func TestLatestImagesKeepsTheNewestWithinTheBounds(t *testing.T) {
	msgs := []model.Message{
		{Role: model.RoleUser, Content: "goal"},
		{Role: model.RoleTool, Content: "old.png", Images: []model.Image{img(100)}},
		{Role: model.RoleTool, Content: "two.png", Images: []model.Image{img(100), img(300)}},
		{Role: model.RoleTool, Content: "new.png", Images: []model.Image{img(200)}},
	}
	cases := []struct {
		name      string
		max       int
		bytes     int64
		wantKept  []int // images kept per message
		wantNotes []int // messages with a note
	}{
		{"no bounds", 0, 0, []int{0, 1, 2, 1}, nil},
		{"two images", 2, 0, []int{0, 0, 1, 1}, []int{1, 2}},
		{"500 bytes", 0, 500, []int{0, 0, 1, 1}, []int{1, 2}},
		{"600 bytes", 0, 600, []int{0, 0, 2, 1}, []int{1}},
		{"one image of 150 bytes", 1, 150, []int{0, 0, 1, 0}, []int{1, 2, 3}},
	}
	for _, c := range cases {
		got := latestImages(msgs, c.max, c.bytes)
		for i, m := range got {
			if len(m.Images) != c.wantKept[i] {
				t.Errorf("%s: message %d keeps %d images, want %d", c.name, i, len(m.Images), c.wantKept[i])
			}
			noted := strings.Contains(m.Content, "no longer shown")
			want := false
			for _, n := range c.wantNotes {
				want = want || n == i
			}
			if noted != want {
				t.Errorf("%s: message %d: %q, note wanted: %v", c.name, i, m.Content, want)
			}
		}
	}
	// The newest image of a message is the one kept.
	if got := latestImages(msgs, 2, 0); len(got[2].Images[0].Data) != 300 {
		t.Errorf("kept an image of %d bytes of message 2, want its last (300)", len(got[2].Images[0].Data))
	}
	// The history itself is not changed.
	if len(msgs[1].Images) != 1 || len(msgs[2].Images) != 2 || strings.Contains(msgs[2].Content, "no longer") {
		t.Errorf("latestImages changed the history: %+v", msgs)
	}
}
