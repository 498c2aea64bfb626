package docs

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = ".."

// pages returns README.md, every docs/*.md and the other READMEs that link
// into docs/, relative to the repository.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found")
	}
	out := []string{"README.md", "deploy/README.md", "bench/README.md", "images/README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(repoRoot, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rel)
	}
	return out
}

func read(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLinksResolve checks every link in the pages: a relative
// link names a file or directory inside the repository, and its #anchor, if
// any, a heading of that page.
func TestLinksResolve(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, page := range pages(t) {
		for _, l := range links(read(t, page)) {
			if isURL(l.target) {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(l.target, "#")
			target := page // a bare #anchor is on the page itself
			if file != "" {
				if strings.HasPrefix(file, "/") {
					t.Errorf("%s:%d: link %q is absolute; link relative to the page", page, l.line, l.target)
					continue
				}
				target = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
			}
			abs := filepath.Join(root, target)
			if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				t.Errorf("%s:%d: link %q leaves the repository", page, l.line, l.target)
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s:%d: link %q: %s does not exist", page, l.line, l.target, filepath.ToSlash(target))
				continue
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if !anchors(read(t, target))[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", page, l.line, l.target, filepath.ToSlash(target), anchor)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links found in README.md and docs/*.md; is the link parser broken?", checked)
	}
}

// TestReadmeStaysInRepository checks that README.md, the front door, points
// nowhere outside the repository: its links are relative links inside it or
// http(s) URLs of public pages, and its text names no path above the
// repository (such as ../shared/ARCHITECTURE.md) or on the author's machine.
func TestReadmeStaysInRepository(t *testing.T) {
	text := read(t, "README.md")
	for _, l := range links(text) {
		if !isURL(l.target) {
			continue // relative: TestLinksResolve keeps it inside
		}
		u, err := url.Parse(l.target)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			t.Errorf("README.md:%d: link %q is neither relative nor an http(s) URL", l.line, l.target)
			continue
		}
		if h := u.Hostname(); h == "localhost" || strings.HasPrefix(h, "127.") || h == "::1" || !strings.Contains(h, ".") {
			t.Errorf("README.md:%d: link %q points at a local address, not public documentation", l.line, l.target)
		}
	}
	for n, line := range strings.Split(text, "\n") {
		for _, bad := range []string{"../", "/work/", "file://"} {
			if strings.Contains(line, bad) {
				t.Errorf("README.md:%d: %q points outside the repository: %s", n+1, bad, line)
			}
		}
	}
}

// TestAnchors pins the heading-to-anchor rule the link check relies on.
func TestAnchors(t *testing.T) {
	page := "# Title\n## Performance (`make bench`)\n## The chick link: TLS\n```\n## not a heading\n```\n## Twice\n## Twice\n"
	got := anchors(page)
	for _, want := range []string{"title", "performance-make-bench", "the-chick-link-tls", "twice", "twice-1"} {
		if !got[want] {
			t.Errorf("anchors(...) lacks %q; has %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("anchors(...) took a line in a code block for a heading")
	}
}

// TestLinksSkipCode pins that links inside code are not links.
func TestLinksSkipCode(t *testing.T) {
	page := "see [a](a.md) and `[text](url)`\n```\n[b](b.md)\n```\n[c](c.md#x \"title\")\n\n    [d](d.md) in an indented block\n"
	var got []string
	for _, l := range links(page) {
		got = append(got, l.target)
	}
	if strings.Join(got, " ") != "a.md c.md#x" {
		t.Errorf("links(...) = %q, want [a.md c.md#x]", got)
	}
}

type link struct {
	target string
	line   int
}

var (
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	autoLink   = regexp.MustCompile(`<((?:https?|file)://[^>\s]+)>`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
)

// links returns the targets of the Markdown links in text, outside code
// blocks and code spans.
func links(text string) []link {
	var out []link
	fence := ""
	indented, prevBlank := false, true
	for n, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		// An indented code block: four spaces after a blank line, and what
		// follows it at the same indentation.
		if strings.HasPrefix(line, "    ") && (indented || prevBlank) {
			indented = true
			continue
		}
		indented = false
		prevBlank = trimmed == ""
		line = codeSpan.ReplaceAllString(line, "")
		for _, re := range []*regexp.Regexp{inlineLink, refLink, autoLink} {
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				out = append(out, link{target: m[1], line: n + 1})
			}
		}
	}
	return out
}

func isURL(target string) bool {
	u, err := url.Parse(target)
	return err == nil && u.Scheme != ""
}

// anchors returns the anchors GitHub gives the headings of a Markdown page:
// the heading's text in lower case, without formatting and punctuation,
// spaces as hyphens, a repeated one suffixed -1, -2, ...
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(title, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		slug := b.String()
		if c := count[slug]; c > 0 {
			out[slug+"-"+strconv.Itoa(c)] = true
		} else {
			out[slug] = true
		}
		count[slug]++
	}
	return out
}
