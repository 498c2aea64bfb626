package broker

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
)

func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImagesAreCountedByTheirSize(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want int64
	}{
		{"a tiny image", pngOf(t, 10, 10), 85},
		{"1568x1568 pixels, a few KB", pngOf(t, 1568, 1568), 1568 * 1568 / 750},
		{"5 MiB no decoder reads", make([]byte, 5<<20), 5 << 10},
		{"1 MiB no decoder reads", make([]byte, 1<<20), 1 << 10},
	}
	for _, c := range cases {
		if got := ImageTokens(model.Image{MimeType: "image/png", Data: c.data}); got != c.want {
			t.Errorf("ImageTokens(%s) = %d, want %d", c.name, got, c.want)
		}
	}
	// Twelve images of 5 MiB: the call, once 12 * 2,048.
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser}}}
	for range 12 {
		req.Messages[0].Images = append(req.Messages[0].Images, model.Image{Data: make([]byte, 5<<20)})
	}
	if got := EstimateInput(req); got < 12*5<<10 {
		t.Errorf("EstimateInput(12 images of 5 MiB) = %d, want at least %d", got, 12*5<<10)
	}
}
