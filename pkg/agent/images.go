package agent

import (
	"fmt"
	"strings"

	"github.com/mother-chat/mother/pkg/model"
)

// latestImages keeps the latest images of msgs within maxImages and
// maxBytes (0: no bound on that); each older image is replaced by a note
// in its message, so a model call never carries more than the bounds, and
// an image is not sent again once newer ones have taken its place. An
// image larger than maxBytes on its own is never sent. msgs is not
// changed.
func latestImages(msgs []model.Message, maxImages int, maxBytes int64) []model.Message {
	if maxImages <= 0 && maxBytes <= 0 {
		return msgs
	}
	var out []model.Message
	n, size := 0, int64(0)
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if len(m.Images) == 0 {
			continue
		}
		var kept []model.Image
		dropped := 0
		// The last image of a message is its latest.
		for j := len(m.Images) - 1; j >= 0; j-- {
			img := m.Images[j]
			b := int64(len(img.Data))
			if (maxImages > 0 && n >= maxImages) || (maxBytes > 0 && size+b > maxBytes) {
				dropped++
				continue
			}
			n++
			size += b
			kept = append(kept, img)
		}
		if dropped == 0 {
			continue
		}
		if out == nil {
			out = append(make([]model.Message, 0, len(msgs)), msgs...)
		}
		for l, r := 0, len(kept)-1; l < r; l, r = l+1, r-1 {
			kept[l], kept[r] = kept[r], kept[l]
		}
		m.Images = kept
		m.Content = strings.TrimRight(m.Content, "\n") + fmt.Sprintf("\n[%d image(s) no longer shown: a model call carries only the latest images (at most %s); read the file again to see it]", dropped, imageBounds(maxImages, maxBytes))
		out[i] = m
	}
	if out == nil {
		return msgs
	}
	return out
}

func imageBounds(maxImages int, maxBytes int64) string {
	var parts []string
	if maxImages > 0 {
		parts = append(parts, fmt.Sprintf("%d images", maxImages))
	}
	switch {
	case maxBytes >= 1<<20:
		parts = append(parts, fmt.Sprintf("%.1f MiB of images", float64(maxBytes)/(1<<20)))
	case maxBytes > 0:
		parts = append(parts, fmt.Sprintf("%d bytes of images", maxBytes))
	}
	return strings.Join(parts, " and ")
}
