// Package readme holds the tests of the project's documentation: every Go
// block of README.md and docs/*.md compiles against the current API, as a
// reader would paste it, and every shell session (a ```console block with
// "$ " prompts) runs against the real programs and prints what it shows.
package readme
