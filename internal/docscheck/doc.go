// Package docscheck holds the test that keeps jfast's Markdown honest: every
// relative link leads to a file of the repository (and its #anchor to a heading
// of that file), and every repository path a page names in backticks exists.
// It has no code of its own; `make test` runs it with the rest.
package docscheck
