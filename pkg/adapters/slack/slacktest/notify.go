package slacktest

import (
	"encoding/json"
	"regexp"
	"strings"
)

// specialRe finds what Slack turns into a notification in a message's
// text: <!channel>, <!here>, <!everyone>, <!subteam^S1> (a user group)
// and <@U1> (a user), each with an optional |label.
var specialRe = regexp.MustCompile(`<(!channel|!here|!everyone|!subteam\^[A-Za-z0-9]+|@[A-Za-z0-9]+)(\|[^>]*)?>`)

// bareRe finds the plain words Slack parses into mass mentions in a
// mrkdwn text object that is not verbatim.
var bareRe = regexp.MustCompile(`(^|[^\w@])@(channel|here|everyone)\b`)

// Notifies lists whom a message, as the fake received it (every version
// of it, posted and edited: Sent), would notify on Slack: the specials
// and user mentions in its text and in its blocks' mrkdwn texts
// ("<!channel>", "<@U1>"), and "@here" for a bare word in a mrkdwn text
// object without verbatim, which Slack parses as a mention. Nil: it
// notifies nobody.
func Notifies(m Message) []string {
	versions := m.Sent
	if len(versions) == 0 {
		versions = []Message{m}
	}
	var out []string
	for _, v := range versions {
		out = append(out, notifies(v)...)
	}
	return out
}

func notifies(m Message) []string {
	var out []string
	add := func(s string) {
		for _, g := range specialRe.FindAllStringSubmatch(s, -1) {
			out = append(out, "<"+g[1]+">")
		}
	}
	add(m.Text)
	var bs []struct {
		Text *struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Verbatim bool   `json:"verbatim"`
		} `json:"text"`
	}
	_ = json.Unmarshal([]byte(m.Blocks), &bs)
	for _, b := range bs {
		if b.Text == nil || b.Text.Type != "mrkdwn" {
			continue
		}
		add(b.Text.Text)
		if !b.Text.Verbatim {
			for _, g := range bareRe.FindAllStringSubmatch(b.Text.Text, -1) {
				out = append(out, "@"+strings.ToLower(g[2]))
			}
		}
	}
	return out
}
