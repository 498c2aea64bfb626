// Command mkpackages builds Mother's Debian packages for `make packages`
// (see internal/packaging): mother for each architecture from the static
// binaries in -bin (mother-linux-ARCH, momctl-linux-ARCH; those of this
// machine's architecture also write the shell completions), mother-chick
// from the chick image tarball, and SHA256SUMS over them, in -out. The
// version comes from git unless -version is given.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/mother-chat/mother/internal/packaging"
)

func main() {
	root := flag.String("root", ".", "the repository (deploy/ is read from here, the version from its git history)")
	bin := flag.String("bin", "dist", "directory with mother-linux-ARCH and momctl-linux-ARCH")
	image := flag.String("chick-image", "", "docker save tarball of "+packaging.ChickImageTag+" (the mother-chick package)")
	chickArch := flag.String("chick-arch", "amd64", "architecture of the chick image")
	out := flag.String("out", "dist/deb", "output directory")
	arches := flag.String("arch", strings.Join(packaging.Arches, ","), "architectures of the mother package, comma-separated")
	version := flag.String("version", "", "Debian version (default: from the VERSION file and git)")
	flag.Parse()
	if err := run(context.Background(), *root, *bin, *image, *chickArch, *out, *arches, *version); err != nil {
		fmt.Fprintln(os.Stderr, "mkpackages:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root, bin, image, chickArch, out, arches, version string) error {
	git, err := packaging.FromGit(ctx, root)
	if err != nil {
		return err
	}
	src := packaging.Source{Root: root, Version: git.Version, Describe: git.Describe, Date: git.Time}
	if version != "" {
		src.Version = version
	}
	comps, err := os.MkdirTemp("", "mother-completions-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(comps)
	if err := completions(ctx, bin, comps); err != nil {
		return err
	}
	var names []string
	for _, arch := range strings.Split(arches, ",") {
		path, err := src.Mother(packaging.MotherBinaries{
			Arch:        arch,
			Mother:      filepath.Join(bin, "mother-linux-"+arch),
			Momctl:      filepath.Join(bin, "momctl-linux-"+arch),
			Completions: comps,
		}, out)
		if err != nil {
			return err
		}
		names = append(names, filepath.Base(path))
	}
	if image != "" {
		path, err := src.Chick(chickArch, image, out)
		if err != nil {
			return err
		}
		names = append(names, filepath.Base(path))
	}
	sums, err := packaging.WriteChecksums(out, names)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(sums)
	if err != nil {
		return err
	}
	fmt.Printf("%s (version %s, dated %s):\n%s", sums, src.Version, src.Date.Format(time.RFC3339), b)
	return nil
}

// completions writes the shell completion scripts of mother and momctl
// into dir (packaging.CompletionFiles), from the binaries in bin built for
// this machine's architecture: the scripts are the same for every one.
func completions(ctx context.Context, bin, dir string) error {
	for _, cmd := range []string{"mother", "momctl"} {
		exe := filepath.Join(bin, cmd+"-linux-"+runtime.GOARCH)
		for shell, name := range map[string]string{"bash": cmd + ".bash", "zsh": "_" + cmd, "fish": cmd + ".fish"} {
			out, err := exec.CommandContext(ctx, exe, "completion", shell).Output()
			if err != nil {
				return fmt.Errorf("%s completion %s (the completion scripts come from the binaries built for %s): %w", exe, shell, runtime.GOARCH, err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), out, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
