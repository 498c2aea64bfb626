package packaging

// The lintian overrides shipped in each package
// (/usr/share/lintian/overrides/NAME): every tag that remains on a clean
// build, each with the reason it is accepted.
const motherOverrides = ``

const chickOverrides = ``
