package recall

import (
	"fmt"
	"strings"
	"time"
)

// snippetRunes bounds the text of one hit in a search result; reading
// around the hit gives the whole message.
const snippetRunes = 400

// readRunes bounds the text of one message read around a hit.
const readRunes = 4000

// line renders a document as one line: "[id] 2006-01-02 15:04 who (kind): text".
func line(d Doc, max int, loc *time.Location) string {
	text := strings.Join(strings.Fields(d.Text), " ")
	if r := []rune(text); len(r) > max {
		text = string(r[:max]) + "..."
	}
	return fmt.Sprintf("[%s] %s %s (%s): %s", d.ID, d.Time.In(loc).Format("2006-01-02 15:04"), d.Who, d.Kind, text)
}

// FormatHits is what the recall tool returns for hits of query in
// channel, times in loc.
func FormatHits(channel, query string, hits []Hit, loc *time.Location) string {
	if len(hits) == 0 {
		return fmt.Sprintf("Nothing in the history of %s matches %q. Try other words.", channel, query)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d hit(s) in the history of %s, best first (read around one with recall_read and its id):\n", len(hits), channel)
	for _, h := range hits {
		b.WriteString(line(h.Doc, snippetRunes, loc))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// FormatAround is what the recall_read tool returns: the documents in
// order, the one read around (at) marked with "→".
func FormatAround(channel string, docs []Doc, at int, loc *time.Location) string {
	var b strings.Builder
	fmt.Fprintf(&b, "From the history of %s:\n", channel)
	for i, d := range docs {
		if i == at {
			b.WriteString("→ ")
		} else {
			b.WriteString("  ")
		}
		b.WriteString(line(d, readRunes, loc))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}
