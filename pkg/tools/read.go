package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
)

// MaxImageBytes caps an image returned inline (the Anthropic API's limit
// for one image).
const MaxImageBytes = 5 << 20

// imageTypes maps the extensions read returns as images to MIME types.
var imageTypes = map[string]string{
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".gif":  "image/gif",
	".webp": "image/webp",
}

// ImageType returns the MIME type of an image file read returns inline, by
// extension, or "".
func ImageType(path string) string { return imageTypes[strings.ToLower(filepath.Ext(path))] }

// Read returns a text file's lines, or an image as image content.
type Read struct {
	ws    *Workspace
	allow func(ctx context.Context, abs string) error
}

var _ agent.Tool = (*Read)(nil)

// Spec implements agent.Tool.
func (r *Read) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "read",
		Description: fmt.Sprintf("Read a file in the workspace (%s). Text comes back from line offset (1-based, default 1) for up to limit lines; "+
			"at most %d lines or %d KB are returned at once, with a notice telling the offset to continue at. "+
			"Images (png, jpg, gif, webp) come back as images.", r.ws.Root(), MaxLines, MaxBytes/1024),
		Parameters: schema([]string{"path"},
			`"path":{"type":"string","description":"File path, relative to the workspace or absolute inside it"}`,
			`"offset":{"type":"integer","description":"First line to return, 1-based (default 1)"}`,
			`"limit":{"type":"integer","description":"Maximum number of lines to return"}`,
		),
	}
}

type readArgs struct {
	Path   string  `json:"path"`
	Offset flexInt `json:"offset"`
	Limit  flexInt `json:"limit"`
}

// Run implements agent.Tool.
func (r *Read) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a readArgs
	if err := decode("read", raw, &a); err != nil {
		return agent.Result{}, err
	}
	if strings.TrimSpace(a.Path) == "" {
		return agent.Result{}, missing("read", "path")
	}
	offset, limit := int64(1), int64(0)
	if a.Offset.set {
		if a.Offset.v < 1 {
			return agent.Result{}, fmt.Errorf("read: offset is a 1-based line number, not %d", a.Offset.v)
		}
		offset = a.Offset.v
	}
	if a.Limit.set {
		if a.Limit.v < 1 {
			return agent.Result{}, fmt.Errorf("read: limit must be at least 1, not %d", a.Limit.v)
		}
		limit = a.Limit.v
	}
	abs, err := r.ws.Resolve(a.Path)
	if err != nil {
		return agent.Result{}, fmt.Errorf("read: %w", err)
	}
	if r.allow != nil {
		if err := r.allow(ctx, abs); err != nil {
			return agent.Result{}, fmt.Errorf("read: %w", err)
		}
	}
	rel := r.ws.Rel(abs)
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return agent.Result{}, fmt.Errorf("read: %s: no such file", rel)
	}
	if err != nil {
		return agent.Result{}, fmt.Errorf("read: %s: %w", rel, unwrapPath(err))
	}
	if fi.IsDir() {
		return agent.Result{}, fmt.Errorf("read: %s is a directory; list it with bash (ls)", rel)
	}
	if !fi.Mode().IsRegular() {
		return agent.Result{}, fmt.Errorf("read: %s is not a regular file", rel)
	}
	if mt := ImageType(abs); mt != "" {
		return readImage(abs, rel, fi.Size())
	}
	return readText(abs, rel, fi.Size(), offset, limit)
}

func readImage(abs, rel string, size int64) (agent.Result, error) {
	if size > MaxImageBytes {
		return agent.Result{}, fmt.Errorf("read: %s is a %s image, larger than the %s an image may have; make a smaller copy first (for example with ImageMagick's convert -resize)", rel, humanBytes(size), humanBytes(MaxImageBytes))
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return agent.Result{}, fmt.Errorf("read: %s: %w", rel, unwrapPath(err))
	}
	// Trust the content over the name when they disagree.
	var mime string
	if sniffed := http.DetectContentType(data); strings.HasPrefix(sniffed, "image/") {
		mime = sniffed
	} else {
		return agent.Result{}, fmt.Errorf("read: %s is named like an image but its content is %s", rel, sniffed)
	}
	return agent.Result{
		Text:   fmt.Sprintf("Image %s (%s, %s).", rel, mime, humanBytes(size)),
		Images: []model.Image{{MimeType: mime, Data: data}},
	}, nil
}

// readBuffer is readText's largest buffer; binaryPeek is how much of a
// file's start is searched for NUL bytes.
const readBuffer, binaryPeek = 64 << 10, 8 << 10

// readText streams the file: it never holds more than the limits (plus one
// line) in memory, and counts the remaining lines for the notice. Its
// buffer is sized to the file (size, from its stat) up to readBuffer: a
// small file costs no 64 KiB allocation. The buffer holds at least the
// binary check's peek, or all of the file when it is smaller; a file grown
// since its stat is still read whole.
func readText(abs, rel string, size, offset, limit int64) (agent.Result, error) {
	f, err := os.Open(abs)
	if err != nil {
		return agent.Result{}, fmt.Errorf("read: %s: %w", rel, unwrapPath(err))
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, int(min(max(size+1, 64), readBuffer)))
	if peek, _ := br.Peek(binaryPeek); bytes.IndexByte(peek, 0) >= 0 {
		return agent.Result{}, fmt.Errorf("read: %s looks binary (it has NUL bytes); inspect it with bash (file, xxd, strings)", rel)
	}

	maxLines := int64(MaxLines)
	if limit > 0 && limit < maxLines {
		maxLines = limit
	}
	var (
		out      []byte
		line     int64 // lines read so far
		shown    int64
		stopped  bool  // a limit stopped the output
		cutLine  bool  // one line longer than MaxBytes was cut
		bytesCut bool  // the byte limit (not the line count) stopped it
		next     int64 // the line to continue at
	)
	for {
		chunk, err := readLine(br, MaxBytes+1)
		if len(chunk) == 0 && err != nil {
			if err != io.EOF {
				return agent.Result{}, fmt.Errorf("read: %s: %w", rel, err)
			}
			break
		}
		line++
		if line < offset || stopped {
			if err == io.EOF {
				break
			}
			continue
		}
		switch {
		case shown >= maxLines:
			stopped, next = true, line
		case len(out)+len(chunk) > MaxBytes:
			if shown == 0 {
				cut := runeCut(chunk, MaxBytes)
				out = append(out, chunk[:cut]...)
				out = append(out, '\n')
				shown, cutLine = 1, true
				stopped, next = true, line+1
			} else {
				stopped, bytesCut, next = true, true, line
			}
		default:
			out = append(out, chunk...)
			shown++
		}
		if err == io.EOF {
			break
		}
	}
	total := line
	if offset > total && !(offset == 1 && total == 0) {
		return agent.Result{}, fmt.Errorf("read: offset %d is past the end of %s (%d lines)", offset, rel, total)
	}
	text := string(out)
	if !stopped || next > total {
		if text == "" {
			text = "(empty file)"
		}
		return agent.Result{Text: text}, nil
	}
	last := offset + shown - 1
	var why string
	switch {
	case cutLine:
		why = fmt.Sprintf("line %d is longer than %d KB and was cut; see the rest with bash (for example cut or fold)", offset, MaxBytes/1024)
	case bytesCut:
		why = fmt.Sprintf("the %d KB limit was reached", MaxBytes/1024)
	case limit > 0 && shown >= limit:
		why = "the requested limit was reached"
	default:
		why = fmt.Sprintf("the %d line limit was reached", MaxLines)
	}
	text = joinNotice(text, fmt.Sprintf("[showing lines %d-%d of %d (%s); continue at offset %d]", offset, last, total, why, next))
	return agent.Result{Text: text}, nil
}

// readLine returns the next line including its newline, at most max bytes
// of it (the rest of an over-long line is consumed and dropped). It returns
// io.EOF with the last line if the file does not end in a newline.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf) < max {
			room := max - len(buf)
			if len(frag) > room {
				buf = append(buf, frag[:room]...)
			} else {
				buf = append(buf, frag...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			return buf, err
		}
		return buf, nil
	}
}
