package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/mother-chat/mother/pkg/adapters/internal/upload"
	"github.com/mother-chat/mother/pkg/render"
)

// maxResponse is the most of an answer to an upload that is read: the
// message Discord creates, or its error.
const maxResponse = 1 << 20

// Upload implements chat.Uploader: the file goes to exactly the channel
// asked for; nothing is shared between concurrent uploads. The file is
// streamed from disk (discordgo would build the whole request in
// memory), and at most upload.Concurrent uploads run at once.
func (a *Adapter) Upload(ctx context.Context, channelID, path, title string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("discord: upload: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("discord: upload: %w", err)
	}
	name := filepath.Base(path)
	if !st.Mode().IsRegular() {
		return fmt.Errorf("discord: upload %s: not a regular file", name)
	}
	if st.Size() > UploadLimit {
		return fmt.Errorf("discord: upload %s: %d bytes is over Discord's %d byte limit", name, st.Size(), UploadLimit)
	}
	send := &discordgo.MessageSend{AllowedMentions: allowNone()}
	if title != "" && title != name {
		send.Content = render.Truncate(title, splitAt)
	}
	body, err := uploadBody(send, name, f, st.Size())
	if err != nil {
		return fmt.Errorf("discord: upload %s: %w", name, err)
	}
	release, err := a.uploads.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("discord: upload %s: %w", name, err)
	}
	defer release()
	err = a.retry(ctx, func() error { return rateLimited(a.sendBody(ctx, channelID, body)) })
	if err != nil {
		return fmt.Errorf("discord: upload %s to %s: %w", name, channelID, err)
	}
	return nil
}

// uploadBody is the form discordgo would send (payload_json, then the
// file as files[0]), with the file left on disk.
func uploadBody(send *discordgo.MessageSend, name string, f *os.File, size int64) (*upload.Body, error) {
	payload, err := discordgo.Marshal(send)
	if err != nil {
		return nil, err
	}
	ph := textproto.MIMEHeader{}
	ph.Set("Content-Disposition", `form-data; name="payload_json"`)
	ph.Set("Content-Type", "application/json")
	fh := textproto.MIMEHeader{}
	fh.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files[0]"; filename="%s"`, quoteEscaper.Replace(name)))
	ct := mime.TypeByExtension(filepath.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	fh.Set("Content-Type", ct)
	return upload.NewBody([]upload.Part{{Header: ph, Data: payload}}, fh, f, size)
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

// sendBody posts body to the channel's messages the way discordgo does
// (its session's client, token, user agent and rate-limit buckets), but
// returns a 429 as an error for the adapter's retry.
func (a *Adapter) sendBody(ctx context.Context, channelID string, body *upload.Body) error {
	endpoint := discordgo.EndpointChannelMessages(channelID)
	rc, _ := body.Open()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, rc)
	if err != nil {
		return err
	}
	req.ContentLength = body.Len()
	req.GetBody = body.Open
	req.Header.Set("Content-Type", body.ContentType)
	req.Header.Set("User-Agent", a.s.UserAgent)
	if a.s.Token != "" {
		req.Header.Set("authorization", a.s.Token)
	}
	bucket := a.s.Ratelimiter.LockBucket(endpoint)
	resp, err := a.s.Client.Do(req)
	if err != nil {
		bucket.Release(nil)
		return err
	}
	defer resp.Body.Close()
	if err := bucket.Release(resp.Header); err != nil {
		return err
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated:
		var m discordgo.Message
		if err := json.Unmarshal(answer, &m); err != nil {
			return fmt.Errorf("read the message Discord made: %w", err)
		}
		return nil
	case http.StatusTooManyRequests:
		var tm discordgo.TooManyRequests
		if err := json.Unmarshal(answer, &tm); err != nil {
			return fmt.Errorf("a rate limit without its wait: %w", err)
		}
		return &discordgo.RateLimitError{RateLimit: &discordgo.RateLimit{TooManyRequests: &tm, URL: endpoint}}
	}
	restErr := &discordgo.RESTError{Request: req, Response: resp, ResponseBody: answer}
	var msg discordgo.APIErrorMessage
	if json.Unmarshal(answer, &msg) == nil {
		restErr.Message = &msg
	}
	return restErr
}
