//go:build !race

package uploadtest

const race = false
