package version

import (
	"os"
	"strings"
	"testing"
)

// TestReleaseIsTheVersionFile: the Go constant and the VERSION file at
// the repository's root say the same release.
func TestReleaseIsTheVersionFile(t *testing.T) {
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != Release {
		t.Fatalf("VERSION says %q, version.Release %q: change both", got, Release)
	}
	v, err := Parse(Release)
	if err != nil || v.String() != Release {
		t.Fatalf("Release %q does not read back: %v %v", Release, v, err)
	}
	if p, err := Parse(Previous); err != nil || !p.less(v) {
		t.Fatalf("Previous %q is not a series before %q: %v", Previous, Release, err)
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"0.2.0": "0.2.0", "v0.2.0": "0.2.0", "0.2": "0.2.0", "": "0.1.0", " 1.10.3 ": "1.10.3",
		"0.2.0-rc1": "0.2.0", "0.2.0+git4.gabc": "0.2.0", "0.3.0~rc1": "0.3.0",
	} {
		v, err := Parse(in)
		if err != nil || v.String() != want {
			t.Errorf("Parse(%q) = %v, %v; want %s", in, v, err, want)
		}
	}
	for _, in := range []string{"dev", "baseline-05b3fdcb302c", "1", "1.2.3.4", "1.x.0", "-1.0.0", "1..0"} {
		if v, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, v)
		}
	}
}

// TestChickRule: Mother 0.2.x works with chick images 0.1.x and 0.2.x
// (and ones that say nothing: 0.1.x); others get one sentence naming
// both releases and the fix.
func TestChickRule(t *testing.T) {
	const what = "the chick image on host gpu"
	for _, ok := range []string{"0.1.0", "0.1.7", "0.2.0", "0.2.9", "", "v0.2.1-rc1"} {
		if s := Chick("0.2.0", ok, what); s != "" {
			t.Errorf("Mother 0.2.0, chick %q: %q, want them to work together", ok, s)
		}
	}
	cases := []struct{ mother, chick, want string }{
		{"0.2.0", "0.9.2", "the chick image on host gpu is 0.9.2; this Mother (0.2.0) needs 0.1.x or 0.2.x: upgrade the mother package here, or install mother-chick 0.2.x there"},
		{"0.2.0", "0.3.0", "the chick image on host gpu is 0.3.0; this Mother (0.2.0) needs 0.1.x or 0.2.x: upgrade the mother package here, or install mother-chick 0.2.x there"},
		{"0.2.0", "1.2.0", "the chick image on host gpu is 1.2.0; this Mother (0.2.0) needs 0.1.x or 0.2.x: upgrade the mother package here, or install mother-chick 0.2.x there"},
		{"0.2.0", "0.0.5", "the chick image on host gpu is 0.0.5; this Mother (0.2.0) needs 0.1.x or 0.2.x: upgrade the mother-chick package there"},
		{"0.4.1", "0.2.0", "the chick image on host gpu is 0.2.0; this Mother (0.4.1) needs 0.3.x or 0.4.x: upgrade the mother-chick package there"},
		{"0.4.1", "", "the chick image on host gpu is 0.1.x (it says no version); this Mother (0.4.1) needs 0.3.x or 0.4.x: upgrade the mother-chick package there"},
	}
	for _, c := range cases {
		if got := Chick(c.mother, c.chick, what); got != c.want {
			t.Errorf("Chick(%q, %q):\n got %q\nwant %q", c.mother, c.chick, got, c.want)
		}
	}
	if s := Chick("0.2.0", "banana", what); !strings.Contains(s, `"banana"`) || !strings.Contains(s, "0.2.0") {
		t.Errorf("an unreadable label: %q", s)
	}
}

// TestMotherRule: a 0.2.x chick works with Mother 0.1.x (who says no
// version) and newer, and names the skew with an older Mother.
func TestMotherRule(t *testing.T) {
	// A newer Mother judges the chick herself, at its Join.
	for _, ok := range []string{"", "0.1.0", "0.2.0", "0.2.3", "0.3.0", "1.0.0"} {
		if s := Mother(Release, ok); s != "" {
			t.Errorf("chick %s, Mother %q: %q, want them to work together", Release, ok, s)
		}
	}
	cases := []struct{ chick, mother, want string }{
		{"0.2.0", "0.0.3", "this chick image is 0.2.0; Mother here is 0.0.3 and it needs Mother 0.1.x or 0.2.x: upgrade the mother package"},
		{"0.5.0", "", "this chick image is 0.5.0; Mother here is 0.1.x (it says no version) and it needs Mother 0.4.x or 0.5.x: upgrade the mother package"},
	}
	for _, c := range cases {
		if got := Mother(c.chick, c.mother); got != c.want {
			t.Errorf("Mother(%q, %q):\n got %q\nwant %q", c.chick, c.mother, got, c.want)
		}
	}
}

func TestRange(t *testing.T) {
	r := Ours()
	if r.String() != "0.1.x or 0.2.x" {
		t.Fatalf("Ours() = %s", r)
	}
	one := Range{Oldest: V{1, 0, 0}, Newest: V{1, 0, 0}}
	if one.String() != "1.0.x" || !one.Holds(V{1, 0, 9}) || one.Holds(V{1, 1, 0}) || one.Holds(V{0, 9, 0}) {
		t.Fatalf("a one-series range: %s", one)
	}
	if ProtocolOf(0) != 1 || ProtocolOf(2) != 2 {
		t.Fatal("ProtocolOf: absent is protocol 1")
	}
}

func TestLine(t *testing.T) {
	for build, want := range map[string]string{"dev": ", build dev", Release: "", "": "", "baseline-05b3fdcb302c": ", build baseline-05b3fdcb302c", "1.0.0~pkgtest1": ", build 1.0.0~pkgtest1"} {
		got := Line("mother", build)
		if !strings.HasPrefix(got, "mother "+Release+" (protocol 2") || !strings.HasSuffix(got, want+")") {
			t.Errorf("Line(mother, %q) = %q, want it to start with mother %s and end with %q", build, got, Release, want+")")
		}
	}
}

// TestImageLabels: the chick images' Dockerfiles label the image with
// this release and protocol by default (build-offline.sh passes the
// VERSION file's too).
func TestImageLabels(t *testing.T) {
	for _, f := range []string{"../../images/chick/Dockerfile", "../../images/chick/Dockerfile.offline"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, want := range []string{"ARG MOTHER_RELEASE=" + Release + "\n", "ARG MOTHER_PROTOCOL=2\n", LabelRelease + "=$MOTHER_RELEASE", LabelProtocol + "=$MOTHER_PROTOCOL"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s lacks %q", f, want)
			}
		}
	}
}
