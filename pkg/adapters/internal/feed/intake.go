package feed

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/speech"
)

// Attachment is one file a platform message carries, as the adapter sees
// it before download.
type Attachment struct {
	// Name is the file name shown to the user.
	Name string
	// Size is the size the platform reports (0: unknown).
	Size int64
	// MimeType is the platform's content type, if any.
	MimeType string
	// Unavailable, when set, is why the file cannot be fetched at all
	// ("no download URL (scope files:read?)"); Fetch is not called.
	Unavailable string
	// Voice marks a voice message or an audio file Mother hears; Seconds
	// is its length as the platform says (0: unknown).
	Voice   bool
	Seconds float64
	// Fetch downloads the file; the caller closes the reader. A mime type
	// it returns fills in a missing MimeType.
	Fetch func(ctx context.Context) (r io.ReadCloser, mimeType string, err error)
}

// Intake saves the attachments of incoming messages into the channel's
// directory. A file it cannot keep (over the limit, failing to download) is
// named in the message text instead, so the model knows it exists: the
// notes read the same on every platform.
type Intake struct {
	// Files is where attachments go; nil: none are saved (each is noted).
	Files chat.Files
	// Max is the largest file kept (0: chat.DefaultMaxAttachment).
	Max int64
	Log *slog.Logger
}

func (in Intake) max() int64 {
	if in.Max <= 0 {
		return chat.DefaultMaxAttachment
	}
	return in.Max
}

// Save downloads atts of the message prefix (its id, made safe for a file
// name) in channelID, and returns what was saved with text plus a note for
// each file that was not.
func (in Intake) Save(ctx context.Context, channelID, prefix string, atts []Attachment, text string) ([]chat.ChannelAttachment, string) {
	out := []chat.ChannelAttachment{}
	if len(atts) == 0 {
		return out, text
	}
	lg := in.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if in.Files == nil {
		return out, text + "\n[attachments not saved: this adapter has no channel storage]"
	}
	dir, err := in.Files.ChannelDir(channelID)
	if err != nil {
		lg.Error("cannot open channel directory for attachments", "channel", channelID, "err", err)
		return out, text + "\n[attachments not saved: " + err.Error() + "]"
	}
	for _, att := range atts {
		if att.Size > in.max() {
			lg.Warn("attachment over the size limit not downloaded", "name", att.Name, "size", att.Size)
			text += note(att, fmt.Sprintf("%s is over the %s limit", FormatSize(att.Size), FormatSize(in.max())))
			continue
		}
		if att.Unavailable != "" {
			lg.Warn("attachment not downloaded", "name", att.Name, "reason", att.Unavailable)
			text += note(att, att.Unavailable)
			continue
		}
		saved, err := in.fetch(ctx, dir, prefix, att)
		if err != nil {
			lg.Warn("attachment not downloaded", "name", att.Name, "err", err)
			text += note(att, err.Error())
			continue
		}
		saved.Voice, saved.Seconds = att.Voice, att.Seconds
		out = append(out, saved)
	}
	return out, text
}

// note is what the text says of an attachment that was not downloaded,
// and why; a voice message is named as one Mother could not hear.
func note(att Attachment, why string) string {
	if att.Voice {
		return "\n" + speech.CannotHear(time.Duration(att.Seconds*float64(time.Second)), why)
	}
	return fmt.Sprintf("\n[attachment %s not downloaded: %s]", att.Name, why)
}

func (in Intake) fetch(ctx context.Context, dir, prefix string, att Attachment) (chat.ChannelAttachment, error) {
	r, mime, err := att.Fetch(ctx)
	if err != nil {
		return chat.ChannelAttachment{}, err
	}
	defer r.Close()
	if att.MimeType != "" {
		mime = att.MimeType
	}
	return in.Files.SaveAttachment(dir, prefix, att.Name, mime, r, in.max())
}

// FormatSize shows a byte count for people: "512 B", "1.5 MB".
func FormatSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
}
