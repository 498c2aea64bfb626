package packaging

// The lintian overrides shipped in each package
// (/usr/share/lintian/overrides/NAME): every tag that remains on a clean
// build, each with the reason it is accepted. TestLintian fails on any
// other tag and on an override lintian no longer needs.

// motherOverrides are those of the mother package for arch (the same for
// both architectures since the WhatsApp adapter).
func motherOverrides(arch string) string {
	return motherCommon + motherSpelling
}

const motherCommon = `# Mother and momctl are built with CGO_ENABLED=0 on purpose: one static
# binary per architecture, cross-built without a C toolchain, that runs the
# same on every Debian release.
mother: statically-linked-binary
# Mother relies on systemd (Type=notify, the watchdog, the sandboxing in the
# unit); there is no sysvinit script to ship.
mother: package-supports-alternative-init-but-no-init.d-script
`

// lintian's spelling check finds these in both builds since the WhatsApp
// adapter's modules (only in amd64 before).
const motherSpelling = `# The misspellings are in strings of Go modules compiled into the binary,
# not in Mother's own text.
mother: spelling-error-in-binary
`

const chickOverrides = `# The chick image is amd64 code (the chick binary and busybox inside it),
# so the package is architecture-dependent although the tarball lives in
# /usr/share, where docker load reads it from.
mother-chick: arch-dep-package-has-big-usr-share
`
