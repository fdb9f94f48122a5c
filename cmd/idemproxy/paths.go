package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"unicode"
)

// problemAmbiguousPath is the type of the 400 answer to a request path
// that servers read in different ways.
const problemAmbiguousPath = problemBase + "ambiguous-path"

// Routes are matched on a normalised path, so that every spelling an
// upstream framework routes to a route's handler is guarded by that
// route, and shares its keys' records. The rules, applied to the path as
// the client sent it:
//
//  1. Refused with 400 (ambiguous: servers disagree on what they mean):
//     an encoded slash, backslash or semicolon (%2F, %5C, %3B), an encoded
//     NUL (%00), a backslash, and any dot segment ("." or "..", also
//     percent-encoded or followed by ;parameters, as in "..;").
//  2. Each segment loses its ;parameters (Tomcat, Jetty and Spring drop
//     them: /orders;jsessionid=1 is /orders) and is percent-decoded.
//  3. Empty segments go: // is /, and there is no trailing slash.
//  4. Unless case_sensitive_paths is set, the path is lower-cased
//     (Express and others match routes without case); route patterns are
//     lower-cased likewise, outside their {wildcards}.
//
// The normalised path is what routes match and what the idempotency
// operation holds; the upstream gets the path as the client sent it.
func normalizePath(u *url.URL, fold bool) (string, bool) {
	raw := u.EscapedPath()
	if strings.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	for i := strings.IndexByte(raw, '%'); i >= 0; i = strings.IndexByte(raw, '%') {
		if len(raw) < i+3 {
			return "", false
		}
		switch strings.ToUpper(raw[i+1 : i+3]) {
		case "2F", "5C", "3B", "00":
			return "", false
		}
		raw = raw[i+3:]
	}
	raw = u.EscapedPath()
	var b strings.Builder
	b.Grow(len(raw))
	for seg := range strings.SplitSeq(raw, "/") {
		if i := strings.IndexByte(seg, ';'); i >= 0 {
			seg = seg[:i]
		}
		dec, err := url.PathUnescape(seg)
		if err != nil || dec == "." || dec == ".." {
			return "", false
		}
		if dec == "" {
			continue
		}
		b.WriteByte('/')
		b.WriteString(dec)
	}
	p := b.String()
	if p == "" {
		p = "/"
	}
	if fold {
		p = strings.ToLower(p)
	}
	return p, true
}

// foldPattern lower-cases the path of a ServeMux pattern ("POST
// /Orders/{ID}" is "POST /orders/{ID}"), outside its wildcards, whose
// names are identifiers.
func foldPattern(pattern string) string {
	method, path, _ := strings.Cut(pattern, " ")
	var b strings.Builder
	b.WriteString(method)
	b.WriteByte(' ')
	depth := 0
	for _, r := range path {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
		}
		if depth == 0 {
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// patternRoot returns, for a pattern ending in a {name...} wildcard
// ("POST /files/{path...}"), the pattern of its root ("POST /files"):
// ServeMux would redirect the root to the root with a slash, which
// normalisation takes off again.
func patternRoot(pattern string) (string, bool) {
	if !strings.HasSuffix(pattern, "...}") {
		return "", false
	}
	i := strings.LastIndex(pattern, "/{")
	if i < 0 {
		return "", false
	}
	root := pattern[:i]
	if strings.HasSuffix(root, " ") {
		root += "/"
	}
	return root, true
}

// origURLKey is the context key of the URL a request came with, before
// its path was normalised.
type origURLKey struct{}

// normalized returns r with its path normalised for routing, or answers
// 400 and reports false. The original URL stays in the context for the
// upstream (originalPath).
func (p *proxy) normalized(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	norm, ok := normalizePath(r.URL, !p.cfg.CaseSensitivePaths)
	if !ok {
		writeProblemRetry(w, r, http.StatusBadRequest, problemAmbiguousPath, "Ambiguous path",
			"the request path holds an encoded slash, backslash or semicolon, a backslash or a dot segment, "+
				"which servers read in different ways; send the path in its plain form", false)
		return nil, false
	}
	if norm == r.URL.Path && r.URL.RawPath == "" {
		return r, true
	}
	r2 := r.WithContext(context.WithValue(r.Context(), origURLKey{}, r.URL))
	u := *r.URL
	u.Path, u.RawPath = norm, ""
	r2.URL = &u
	return r2, true
}

// originalPath sets out's path back to what the client sent, when the
// request's path was normalised.
func originalPath(in, out *http.Request) {
	if orig, ok := in.Context().Value(origURLKey{}).(*url.URL); ok {
		out.URL.Path, out.URL.RawPath = orig.Path, orig.RawPath
	}
}
