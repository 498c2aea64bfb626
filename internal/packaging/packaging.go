// Package packaging builds Mother's Debian packages with nfpm (used as a
// library, no dpkg-deb needed): mother, the daemon and momctl with the
// systemd unit and the maintainer scripts that make the mother user and the
// data directory, and keep the previous binary and state at an upgrade to
// go back to (deploy/debian/README.Debian), for the machine Mother runs on
// (arm64 for the Pi, amd64); and mother-chick, the chick image as a docker-save tarball with the
// inference server's Docker set-up, for the machine whose engine runs the
// chicks. What goes in comes from deploy/ in the repository: the unit from
// deploy/systemd (with its paths adapted), the maintainer scripts, manual
// pages and documents from deploy/debian, the inference files from
// deploy/inference. internal/mkpackages drives it for `make packages`.
package packaging

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"maps"
	"slices"
)

// Maintainer is the Maintainer field of both packages.
const Maintainer = "Mother developers <mother-chat@users.noreply.github.com>"

const homepage = "https://github.com/mother-chat/mother"

// ChickImageTag is the tag the chick image must carry in the tarball: the
// image Mother's configuration names by default (config.DefaultChickImage).
const ChickImageTag = "mother-chick:dev"

// Source is what every package is made from.
type Source struct {
	// Root is the repository: deploy/ is read from here.
	Root string
	// Version is the Debian version (see DebianVersion).
	Version string
	// Describe is the version stamped into the binaries (git describe),
	// quoted in the changelog.
	Describe string
	// Date dates the changelog entry and every file in the packages, so
	// that the same commit packs to the same bytes.
	Date time.Time
}

func (s Source) validate() error {
	if s.Root == "" {
		return fmt.Errorf("packaging: Root is empty")
	}
	if !debianUpstream.MatchString(s.Version) {
		return fmt.Errorf("packaging: Version %q is not a Debian version", s.Version)
	}
	if s.Date.IsZero() {
		return fmt.Errorf("packaging: Date is not set")
	}
	return nil
}

// Arches are the architectures the mother package is built for.
var Arches = []string{"amd64", "arm64"}

// MotherBinaries are the static binaries of one architecture.
type MotherBinaries struct {
	Arch   string // Debian architecture: amd64 or arm64
	Mother string // path of the mother binary
	Momctl string // path of the momctl binary
	// Completions is a directory of the shell completion scripts (see
	// CompletionFiles), written by binaries that run on the build host:
	// the scripts are the same for every architecture.
	Completions string
}

// CompletionFiles maps the shell completion scripts a Completions
// directory holds (named after the command: "mother.bash", "_mother",
// "mother.fish", and momctl's likewise) to where Debian's shells look for
// them.
func CompletionFiles() map[string]string {
	out := map[string]string{}
	for _, cmd := range []string{"mother", "momctl"} {
		out[cmd+".bash"] = "/usr/share/bash-completion/completions/" + cmd
		out["_"+cmd] = "/usr/share/zsh/vendor-completions/_" + cmd
		out[cmd+".fish"] = "/usr/share/fish/vendor_completions.d/" + cmd + ".fish"
	}
	return out
}

// Mother builds the mother package for bins.Arch into outDir and returns
// its path.
func (s Source) Mother(bins MotherBinaries, outDir string) (string, error) {
	if err := s.validate(); err != nil {
		return "", err
	}
	if bins.Arch == "" || bins.Mother == "" || bins.Momctl == "" || bins.Completions == "" {
		return "", fmt.Errorf("packaging: mother needs Arch, Mother, Momctl and Completions (got %+v)", bins)
	}
	stage, err := os.MkdirTemp("", "mother-deb-")
	if err != nil {
		return "", fmt.Errorf("packaging: stage: %w", err)
	}
	defer os.RemoveAll(stage)

	unit, err := s.unit()
	if err != nil {
		return "", err
	}
	staged := map[string][]byte{"mother.service": unit}
	if err := s.docFiles("mother", staged); err != nil {
		return "", err
	}
	for _, page := range []string{"mother.1", "momctl.1"} {
		if err := s.gzipFile(filepath.Join("deploy", "debian", "man", page), page+".gz", staged); err != nil {
			return "", err
		}
	}

	deploy := func(p ...string) string { return filepath.Join(append([]string{s.Root, "deploy"}, p...)...) }
	contents := files.Contents{
		file(bins.Mother, "/usr/bin/mother", 0o755),
		file(bins.Momctl, "/usr/bin/momctl", 0o755),
		// Run by the postinst after an upgrade: health, else go back.
		file(deploy("debian", "mother-upgrade-check"), "/usr/lib/mother/upgrade-check", 0o755),
		file(filepath.Join(stage, "mother.service"), "/lib/systemd/system/mother.service", 0o644),
		// Shipped with the usual modes; the postinst's dpkg-statoverride
		// makes them root:mother 0750 and 0640 from then on (dpkg applies
		// the override at every unpack, so an upgrade never widens them).
		{Destination: "/etc/mother", Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Mode: 0o755}},
		{Source: deploy("systemd", "mother.env.example"), Destination: "/etc/mother/mother.env", Type: files.TypeConfigNoReplace,
			FileInfo: &files.ContentFileInfo{Mode: 0o644}},
		file(filepath.Join(stage, "mother.1.gz"), "/usr/share/man/man1/mother.1.gz", 0o644),
		file(filepath.Join(stage, "momctl.1.gz"), "/usr/share/man/man1/momctl.1.gz", 0o644),
		file(deploy("debian", "README.Debian"), "/usr/share/doc/mother/README.Debian", 0o644),
	}
	comps := CompletionFiles()
	for _, name := range slices.Sorted(maps.Keys(comps)) {
		src, dst := filepath.Join(bins.Completions, name), comps[name]
		if _, err := os.Stat(src); err != nil {
			return "", fmt.Errorf("packaging: completion script: %w", err)
		}
		contents = append(contents, file(src, dst, 0o644))
	}
	contents = append(contents, docContents("mother", stage, motherOverrides(bins.Arch), staged)...)
	if err := writeStage(stage, staged); err != nil {
		return "", err
	}
	return s.build(&nfpm.Info{
		Name:    "mother",
		Arch:    bins.Arch,
		Section: "net",
		Description: "chat assistant that runs tasks in containers\n" +
			"Mother answers in Discord, Slack and Telegram channels and hands longer\n" +
			"work to chicks, short-lived containers on a Docker engine, often on\n" +
			"another machine with a GPU (package mother-chick there). This package\n" +
			"holds the daemon, momctl and the systemd unit; it creates the system\n" +
			"user mother and the data directory /var/lib/mother.",
		Overridables: nfpm.Overridables{
			Depends:  []string{"adduser"},
			Suggests: []string{"mother-chick"},
			Contents: contents,
			Scripts: nfpm.Scripts{
				PreInstall:  deploy("debian", "mother.preinst"),
				PostInstall: deploy("debian", "mother.postinst"),
				PreRemove:   deploy("debian", "mother.prerm"),
				PostRemove:  deploy("debian", "mother.postrm"),
			},
		},
	}, outDir)
}

// Chick builds the mother-chick package for arch (the architecture of the
// chick binary in the image) from imageTar, the output of `docker save` of
// an image tagged ChickImageTag, into outDir and returns its path.
func (s Source) Chick(arch, imageTar, outDir string) (string, error) {
	if err := s.validate(); err != nil {
		return "", err
	}
	if arch == "" || imageTar == "" {
		return "", fmt.Errorf("packaging: mother-chick needs an architecture and the image tarball")
	}
	if _, err := os.Stat(imageTar); err != nil {
		return "", fmt.Errorf("packaging: chick image: %w", err)
	}
	stage, err := os.MkdirTemp("", "mother-chick-deb-")
	if err != nil {
		return "", fmt.Errorf("packaging: stage: %w", err)
	}
	defer os.RemoveAll(stage)

	staged := map[string][]byte{}
	if err := s.docFiles("mother-chick", staged); err != nil {
		return "", err
	}
	for _, page := range []string{"mother-chick-load.8", "mother-docker-tls.8"} {
		if err := s.gzipFile(filepath.Join("deploy", "debian", "man", page), page+".gz", staged); err != nil {
			return "", err
		}
	}
	deploy := func(p ...string) string { return filepath.Join(append([]string{s.Root, "deploy"}, p...)...) }
	contents := files.Contents{
		file(imageTar, "/usr/share/mother-chick/mother-chick-image.tar", 0o644),
		file(deploy("inference", "daemon.json"), "/usr/share/mother-chick/inference/daemon.json", 0o644),
		file(deploy("inference", "docker-override.conf"), "/usr/share/mother-chick/inference/docker-override.conf", 0o644),
		file(deploy("debian", "mother-chick-load"), "/usr/sbin/mother-chick-load", 0o755),
		file(deploy("inference", "gen-docker-tls.sh"), "/usr/sbin/mother-docker-tls", 0o755),
		file(filepath.Join(stage, "mother-chick-load.8.gz"), "/usr/share/man/man8/mother-chick-load.8.gz", 0o644),
		file(filepath.Join(stage, "mother-docker-tls.8.gz"), "/usr/share/man/man8/mother-docker-tls.8.gz", 0o644),
		file(deploy("debian", "README.chick"), "/usr/share/doc/mother-chick/README.Debian", 0o644),
	}
	contents = append(contents, docContents("mother-chick", stage, chickOverrides, staged)...)
	if err := writeStage(stage, staged); err != nil {
		return "", err
	}
	return s.build(&nfpm.Info{
		Name:    "mother-chick",
		Arch:    arch,
		Section: "net",
		Description: "chick image and Docker set-up for Mother's inference server\n" +
			"Mother, a chat assistant, runs longer tasks in chicks: containers on a\n" +
			"Docker engine, usually on a machine with a GPU. This package holds the\n" +
			"chick image as a tarball for docker load (mother-chick-load), the TLS\n" +
			"certificate script and the dockerd configuration that let Mother reach\n" +
			"that engine. It changes no Docker configuration by itself.",
		Overridables: nfpm.Overridables{
			Recommends: []string{"docker.io | docker-ce", "openssl"},
			Contents:   contents,
			Scripts: nfpm.Scripts{
				PostInstall: deploy("debian", "mother-chick.postinst"),
			},
		},
	}, outDir)
}

// build fills in what both packages share and writes the .deb.
func (s Source) build(info *nfpm.Info, outDir string) (string, error) {
	info.Version = s.Version
	info.VersionSchema = "none"
	info.Platform = "linux"
	info.Priority = "optional"
	info.Maintainer = Maintainer
	info.Homepage = homepage
	info.MTime = s.Date
	info.Umask = 0o022
	for _, c := range info.Contents {
		if c.FileInfo == nil {
			c.FileInfo = &files.ContentFileInfo{}
		}
		c.FileInfo.Owner, c.FileInfo.Group, c.FileInfo.MTime = "root", "root", s.Date
	}
	info = nfpm.WithDefaults(info)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("packaging: %w", err)
	}
	name := fmt.Sprintf("%s_%s_%s.deb", info.Name, info.Version, info.Arch)
	path := filepath.Join(outDir, name)
	var buf bytes.Buffer
	if err := deb.Default.Package(info, &buf); err != nil {
		return "", fmt.Errorf("packaging: build %s: %w", name, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("packaging: %w", err)
	}
	return path, nil
}

// unit is deploy/systemd/mother.service adapted to the package: the binary
// in /usr/bin, and the data directory 0750 (the group mother may read it;
// systemd applies StateDirectoryMode at every start). A unit that no
// longer has the lines adapted here is an error, not a silent mismatch.
func (s Source) unit() ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(s.Root, "deploy", "systemd", "mother.service"))
	if err != nil {
		return nil, fmt.Errorf("packaging: unit: %w", err)
	}
	unit := string(b)
	for _, r := range [][2]string{
		{"ExecStart=/usr/local/bin/mother ", "ExecStart=/usr/bin/mother "},
		{"StateDirectoryMode=0700\n", "StateDirectoryMode=0750\n"},
		{"# Install: see deploy/README.md.", "# Installed by the mother package (see /usr/share/doc/mother/README.Debian)."},
	} {
		if !strings.Contains(unit, r[0]) {
			return nil, fmt.Errorf("packaging: deploy/systemd/mother.service has no %q to adapt", strings.TrimSpace(r[0]))
		}
		unit = strings.Replace(unit, r[0], r[1], 1)
	}
	return []byte(unit), nil
}

// docFiles stages the copyright file and the changelog of pkg.
func (s Source) docFiles(pkg string, staged map[string][]byte) error {
	copyright, err := os.ReadFile(filepath.Join(s.Root, "deploy", "debian", "copyright"))
	if err != nil {
		return fmt.Errorf("packaging: %w", err)
	}
	staged["copyright"] = copyright
	describe := s.Describe
	if describe == "" {
		describe = s.Version
	}
	changelog := fmt.Sprintf("%s (%s) unstable; urgency=medium\n\n  * Built from git %s.\n\n -- %s  %s\n",
		pkg, s.Version, describe, Maintainer, s.Date.UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	gz, err := gzipBytes([]byte(changelog))
	if err != nil {
		return err
	}
	staged["changelog.gz"] = gz
	return nil
}

// docContents lists the staged copyright file and changelog of pkg, and
// its lintian overrides when it has any (staging them too).
func docContents(pkg, stage, overrides string, staged map[string][]byte) files.Contents {
	c := files.Contents{
		file(filepath.Join(stage, "copyright"), "/usr/share/doc/"+pkg+"/copyright", 0o644),
		file(filepath.Join(stage, "changelog.gz"), "/usr/share/doc/"+pkg+"/changelog.gz", 0o644),
	}
	if overrides != "" {
		staged["lintian-overrides"] = []byte(overrides)
		c = append(c, file(filepath.Join(stage, "lintian-overrides"), "/usr/share/lintian/overrides/"+pkg, 0o644))
	}
	return c
}

// gzipFile stages the repository file rel, compressed, as name.
func (s Source) gzipFile(rel, name string, staged map[string][]byte) error {
	b, err := os.ReadFile(filepath.Join(s.Root, rel))
	if err != nil {
		return fmt.Errorf("packaging: %w", err)
	}
	gz, err := gzipBytes(b)
	if err != nil {
		return err
	}
	staged[name] = gz
	return nil
}

// gzipBytes compresses as Debian wants documentation compressed: best
// compression, no name or time in the header (gzip -9n).
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, fmt.Errorf("packaging: gzip: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("packaging: gzip: %w", err)
	}
	return buf.Bytes(), nil
}

func writeStage(dir string, staged map[string][]byte) error {
	for name, b := range staged {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("packaging: stage %s: %w", name, err)
		}
	}
	return nil
}

func file(src, dst string, mode os.FileMode) *files.Content {
	return &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: mode}}
}

// WriteChecksums writes SHA256SUMS in dir for the named files in it, in
// the format `sha256sum -c` reads, and returns its path.
func WriteChecksums(dir string, names []string) (string, error) {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	var out strings.Builder
	for _, name := range sorted {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("checksums: %w", err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("checksums: %s: %w", name, err)
		}
		fmt.Fprintf(&out, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), name)
	}
	path := filepath.Join(dir, "SHA256SUMS")
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		return "", fmt.Errorf("checksums: %w", err)
	}
	return path, nil
}
