// Package canonjson writes JSON documents in the canonical form that
// keying fingerprints hash: no insignificant whitespace, members sorted by
// name, strings and numbers spelled one way, and the members that a set
// of volatile paths names dropped. The form itself is specified in the
// documentation of package keying, section "Canonical JSON";
// keying.Canonicalize is this package's Canonicalize.
//
// The package is internal so that its entry points can serve keying's hot
// path as they are: [AppendFlat] canonicalizes the usual small flat object
// with no parser at all, and a pooled [Parser] (with [Parser.Buf] for the
// caller's hash input) handles any other document.
//
// # Fast paths and their reference
//
// Each fast path returns what the general parser would, byte for byte and
// error for error, or declines: objects whose members are canonical as
// written are copied from the input (parser.go, verbatim.go), flat objects
// are sorted without a parser (flat.go), and runs of string text are
// scanned eight bytes a step (word.go, the one file that does so, beside
// the byte-at-a-time code each step must agree with). The canonicalizer
// as it was before any fast path is kept frozen in reference_test.go: the
// tests and fuzz targets compare [Canonicalize] with it on every document
// they build, and word_test.go compares each eight-byte step with its
// plain counterpart at every offset.
package canonjson
