// Package docs holds Mother's documentation pages (Markdown) and no code; its
// tests check that the README and the pages link only to files and headings
// that exist, and that the README links nowhere outside the repository.
package docs
