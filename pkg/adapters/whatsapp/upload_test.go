package whatsapp

import (
	"path/filepath"
	"testing"

	"github.com/mother-chat/mother/pkg/adapters/internal/upload/uploadtest"
)

// TestUploadArrivesWhole: a 25 MiB document goes through the library's
// reader upload (encrypted into a temporary file, not held whole) and
// comes back intact by its keys.
func TestUploadArrivesWhole(t *testing.T) {
	t.Parallel()
	a, f, _ := newTestAdapter(t, nil)
	start(t, a)
	paths, sums := uploadtest.Make(t, t.TempDir(), 1, uploadtest.FileBytes)
	if err := a.Upload(t.Context(), ChannelID(mario), paths[0], ""); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	doc := f.chat(mario)[0].Msg.GetDocumentMessage()
	name := filepath.Base(paths[0])
	if doc == nil || doc.GetFileName() != name || doc.GetFileLength() != uploadtest.FileBytes {
		t.Fatalf("document sent as %v", doc)
	}
	data, err := f.Download(t.Context(), doc)
	if err != nil || uploadtest.Sum(data) != sums[name] {
		t.Errorf("the sent document came back with %d bytes, sum %s (%v); want sum %s", len(data), uploadtest.Sum(data), err, sums[name])
	}
}
