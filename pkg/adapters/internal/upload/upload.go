// Package upload holds what the platform adapters share for sending files:
// a bound on how many uploads run at once, and a multipart body that
// streams a file from disk instead of holding it in memory.
package upload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"os"
)

// Concurrent is how many uploads one adapter runs at once. The others
// wait their turn: an upload is bound by the network, and each holds an
// open file and a connection.
const Concurrent = 2

// Slots bounds the uploads of one adapter.
type Slots struct{ ch chan struct{} }

// NewSlots returns room for n uploads at once.
func NewSlots(n int) *Slots { return &Slots{ch: make(chan struct{}, max(n, 1))} }

// Acquire waits for a free slot. The caller calls the returned release
// when its upload is over.
func (s *Slots) Acquire(ctx context.Context) (release func(), err error) {
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for an upload slot: %w", ctx.Err())
	}
}

// Part is a form field written before the file.
type Part struct {
	Header textproto.MIMEHeader
	Data   []byte
}

// Body is a multipart/form-data body whose file is read from disk as the
// request is sent. Only the parts' headers and fields are in memory.
type Body struct {
	head, tail []byte
	file       *os.File
	size       int64
	// ContentType is the body's Content-Type, with its boundary.
	ContentType string
}

// NewBody lays out fields, then the file f of size bytes under fileHeader,
// as one form. f is read from its start each time the body is opened.
func NewBody(fields []Part, fileHeader textproto.MIMEHeader, f *os.File, size int64) (*Body, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range fields {
		w, err := mw.CreatePart(p.Header)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(p.Data); err != nil {
			return nil, err
		}
	}
	if _, err := mw.CreatePart(fileHeader); err != nil {
		return nil, err
	}
	head := bytes.Clone(buf.Bytes())
	buf.Reset()
	if err := mw.Close(); err != nil {
		return nil, err
	}
	return &Body{head: head, tail: bytes.Clone(buf.Bytes()), file: f, size: size, ContentType: mw.FormDataContentType()}, nil
}

// Len is the body's length in bytes.
func (b *Body) Len() int64 { return int64(len(b.head)) + b.size + int64(len(b.tail)) }

// Open returns a reader of the whole body (an http.Request's GetBody).
// A file that changed size since NewBody fails the request: the reader
// ends early and the HTTP client sees a short body.
func (b *Body) Open() (io.ReadCloser, error) {
	return io.NopCloser(io.MultiReader(bytes.NewReader(b.head), io.NewSectionReader(b.file, 0, b.size), bytes.NewReader(b.tail))), nil
}
