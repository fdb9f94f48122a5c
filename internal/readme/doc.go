// Package readme holds the test that every Go block of the project's
// README.md compiles against the current API, as a reader would paste it.
package readme
