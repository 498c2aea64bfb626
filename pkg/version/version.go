// Package version is Mother's release number, her wire protocol number,
// and the rule that says which releases of Mother and of the chick image
// work together.
//
// The release is kept in the VERSION file at the repository's root, so a
// clone without tags knows it; Release holds the same text for the Go
// code (a test checks that they agree). A build may carry a label besides
// (-ldflags "-X main.version=..."), such as git describe's output or a
// test's "dev": that label says which build it is, never which release.
//
// The rule: a release series is the major and minor number ("0.2" of
// "0.2.0"). Mother of series N works with chicks and chick images of
// series N and of the previous series (Previous), and a chick of series N
// works with Mother of those two series. A chick, image or Mother that
// says no release (one built before releases were numbered) is of the
// first series, 0.1.
package version

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// Release is this release (the VERSION file).
const Release = "0.2.0"

// Protocol is the wire protocol of this release: 2 since 0.2.0. A peer
// that sends none (0.1.x) speaks protocol 1.
const Protocol = 2

// Previous is the release series before this one: Mother works with its
// chick images, and chicks with its Mother.
const Previous = "0.1"

// Absent is the release of a peer or an image that says none: the first
// release, before versions were sent.
const Absent = "0.1.0"

// Image labels that carry the chick image's release and protocol.
const (
	LabelRelease  = "org.opencontainers.image.version"
	LabelProtocol = "chat.mother.protocol"
)

// gRPC metadata keys on the gate's calls to Mother.
const (
	MetaRelease  = "mother-release"
	MetaProtocol = "mother-protocol"
)

// commit is the commit this binary was built from, when stamped with
// -ldflags "-X github.com/mother-chat/mother/pkg/version.commit=...";
// otherwise Go's own build information gives it, when it has it.
var commit string

// Commit is the commit this binary was built from, abbreviated to 12
// characters ("+dirty" when the tree had changes); empty when unknown.
func Commit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return rev
}

// Line is what a binary prints for --version: its name and the release
// first, then the protocol, the commit and the build label when they add
// something ("mother 0.2.0 (protocol 2, data format 1, commit
// 05b3fdcb302c, build v0.2.0-3-g05b3fdc)"); extra details follow the
// protocol ("data format 1" for mother).
func Line(program, build string, extra ...string) string {
	details := append([]string{"protocol " + strconv.Itoa(Protocol)}, extra...)
	if c := Commit(); c != "" {
		details = append(details, "commit "+c)
	}
	if b := strings.TrimSpace(build); b != "" && b != Release && b != "v"+Release {
		details = append(details, "build "+b)
	}
	return fmt.Sprintf("%s %s (%s)", program, Release, strings.Join(details, ", "))
}

// V is a release number: major.minor.patch.
type V struct {
	Major, Minor, Patch int
}

// Parse reads a release number such as "0.2.0", "v0.2.0", "0.2" or
// "0.2.0-rc1" (what follows the patch number, after "-" or "+", is
// ignored). An empty string is Absent.
func Parse(s string) (V, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if t == "" {
		t = Absent
	}
	if i := strings.IndexAny(t, "-+~"); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return V{}, fmt.Errorf("release %q is not a version such as 0.2.0", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || p == "" {
			return V{}, fmt.Errorf("release %q is not a version such as 0.2.0", s)
		}
		n[i] = v
	}
	return V{n[0], n[1], n[2]}, nil
}

// String is "major.minor.patch".
func (v V) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Series is "major.minor".
func (v V) Series() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Compare orders two release numbers: -1, 0 or 1.
func (v V) Compare(w V) int {
	for _, d := range [3]int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		switch {
		case d < 0:
			return -1
		case d > 0:
			return 1
		}
	}
	return 0
}

// less orders release series.
func (v V) less(w V) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	return v.Minor < w.Minor
}

// Range is the release series a side works with, oldest and newest,
// both included.
type Range struct {
	Oldest, Newest V
}

// Ours is this release's range: Previous and this release's series.
func Ours() Range {
	cur, err := Parse(Release)
	if err != nil {
		panic("version: Release is not a version: " + err.Error())
	}
	prev, err := Parse(Previous)
	if err != nil {
		panic("version: Previous is not a version: " + err.Error())
	}
	return Range{Oldest: prev, Newest: cur}
}

// Holds reports whether v's series is within r.
func (r Range) Holds(v V) bool { return !v.less(r.Oldest) && !r.Newest.less(v) }

// String names the series of r: "0.1.x or 0.2.x".
func (r Range) String() string {
	if r.Oldest.Series() == r.Newest.Series() {
		return r.Newest.Series() + ".x"
	}
	return r.Oldest.Series() + ".x or " + r.Newest.Series() + ".x"
}

// Shown is how a release someone sent or labelled is named in a
// sentence: as it was given, or Absent's series when it was not.
func Shown(release string) string {
	if strings.TrimSpace(release) == "" {
		return "0.1.x (it says no version)"
	}
	return strings.TrimSpace(release)
}

// Chick tells whether Mother of release mother works with a chick (or
// chick image) of release chick. It returns "" when they work together,
// else one sentence that names both and the fix. what is how the chick is
// named: "the chick image on host gpu", "the chick on host gpu".
func Chick(mother, chick, what string) string {
	m, err := Parse(mother)
	if err != nil {
		return fmt.Sprintf("this Mother's release %q cannot be read; reinstall the mother package", mother)
	}
	r := Range{Oldest: m, Newest: m}
	if m.Series() == mustSeries(Release) {
		r = Ours()
	} else if m.Minor > 0 {
		r.Oldest.Minor--
	}
	c, err := Parse(chick)
	if err != nil {
		return fmt.Sprintf("%s says release %q, which this Mother (%s) cannot read; she needs %s: install the mother-chick package of her release there", what, chick, m, r)
	}
	switch {
	case r.Holds(c):
		return ""
	case c.less(r.Oldest):
		return fmt.Sprintf("%s is %s; this Mother (%s) needs %s: upgrade the mother-chick package there", what, Shown(chick), m, r)
	default:
		return fmt.Sprintf("%s is %s; this Mother (%s) needs %s: upgrade the mother package here, or install mother-chick %s.x there", what, Shown(chick), m, r, r.Newest.Series())
	}
}

// Mother tells whether a chick of release chick works with Mother of
// release mother (as her JoinResponse says; empty: 0.1.x). It returns ""
// when they do, else the sentence the chick ends its run with. A chick
// judges only a Mother older than its range: a newer Mother judges the
// chick herself when it joins (she knows which chicks she works with).
func Mother(chick, mother string) string {
	c, err := Parse(chick)
	if err != nil {
		return fmt.Sprintf("this chick's release %q cannot be read; reinstall the mother-chick package", chick)
	}
	r := Range{Oldest: c, Newest: c}
	if c.Series() == mustSeries(Release) {
		r = Ours()
	} else if c.Minor > 0 {
		r.Oldest.Minor--
	}
	m, err := Parse(mother)
	if err != nil {
		return fmt.Sprintf("this chick image is %s; Mother here says release %q, which it cannot read; it needs Mother %s: install the mother package of that release", c, mother, r)
	}
	if m.less(r.Oldest) {
		return fmt.Sprintf("this chick image is %s; Mother here is %s and it needs Mother %s: upgrade the mother package", c, Shown(mother), r)
	}
	return ""
}

// ProtocolOf reads a protocol number as sent: 0 (absent) is 1.
func ProtocolOf(n int32) int32 {
	if n <= 0 {
		return 1
	}
	return n
}

func mustSeries(s string) string {
	v, err := Parse(s)
	if err != nil {
		panic("version: " + err.Error())
	}
	return v.Series()
}
