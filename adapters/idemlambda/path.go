package idemlambda

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoKey is wrapped by the error of an invocation whose event has no
// usable idempotency key: the key path is absent from the event, holds
// null, an object or an array, or the key function failed. The error names
// the path; it never quotes the event.
var ErrNoKey = errors.New("idemlambda: event has no idempotency key")

// A path names a value inside an event's JSON, as the event arrives
// (the field names of its JSON encoding, not of the Go type): segments
// separated by dots, each an object member's name or an array index.
// A segment in double quotes (JSON string syntax) may hold dots. A string
// whose text is JSON (an API Gateway or SQS "body") is parsed when the
// path goes on into it.
//
//	headers.Idempotency-Key
//	body.order.id
//	requestContext.http.method
//	detail."order.id"
//	Records.0.messageId
type path struct {
	text     string
	segments []string
}

// parsePath parses text as a path, or says what is wrong with it.
func parsePath(text string) (path, error) {
	p := path{text: text}
	rest := text
	for {
		var seg string
		if strings.HasPrefix(rest, `"`) {
			end := closingQuote(rest)
			if end < 0 {
				return path{}, fmt.Errorf("path %q: unterminated quoted segment", text)
			}
			if err := json.Unmarshal([]byte(rest[:end+1]), &seg); err != nil {
				return path{}, fmt.Errorf("path %q: quoted segment: %v", text, err)
			}
			rest = rest[end+1:]
			if rest != "" && rest[0] != '.' {
				return path{}, fmt.Errorf("path %q: a quoted segment must be followed by '.' or end the path", text)
			}
		} else {
			i := strings.IndexByte(rest, '.')
			if i < 0 {
				i = len(rest)
			}
			seg, rest = rest[:i], rest[i:]
			if seg == "" {
				return path{}, fmt.Errorf("path %q: empty segment", text)
			}
		}
		p.segments = append(p.segments, seg)
		if rest == "" {
			return p, nil
		}
		rest = rest[1:] // the dot
		if rest == "" {
			return path{}, fmt.Errorf("path %q: ends with '.'", text)
		}
	}
}

// closingQuote returns the index of the quote that closes the JSON string
// s begins with, or -1.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// errAbsent reports a path that does not reach a value.
var errAbsent = errors.New("absent")

// document is an event's JSON, with its top-level members decoded once
// for every path that reads it.
type document struct {
	raw    []byte
	top    map[string]json.RawMessage // nil until read, or when raw is no object
	topErr error
	read   bool
}

// member returns the top-level member name, and whether the document is
// an object at all.
func (d *document) member(name string) (v json.RawMessage, found, object bool, err error) {
	if !d.read {
		d.read = true
		if t := bytes.TrimSpace(d.raw); len(t) > 0 && t[0] == '{' {
			d.topErr = json.Unmarshal(t, &d.top)
		}
	}
	if d.topErr != nil || d.top == nil {
		return nil, false, false, d.topErr
	}
	v, found = d.top[name]
	return v, found, true, nil
}

// lookup returns the raw JSON the path names in d, or an error wrapping
// errAbsent that names the first segment it could not follow.
func (p path) lookup(d *document) (json.RawMessage, error) {
	v, found, object, err := d.member(p.segments[0])
	switch {
	case err != nil:
		return nil, err
	case !object:
		return p.walk(d.raw, 0)
	case !found:
		return nil, fmt.Errorf("%w: %s has no member %q", errAbsent, p.prefix(0), p.segments[0])
	}
	return p.walk(v, 1)
}

// walk follows the path's segments from the one numbered from, in cur.
func (p path) walk(cur json.RawMessage, from int) (json.RawMessage, error) {
	for i := from; i < len(p.segments); i++ {
		seg := p.segments[i]
		cur = bytes.TrimSpace(cur)
		if len(cur) > 0 && cur[0] == '"' { // a string holding JSON, such as a body
			var s string
			if err := json.Unmarshal(cur, &s); err != nil {
				return nil, err
			}
			cur = bytes.TrimSpace([]byte(s))
			if !json.Valid(cur) {
				return nil, fmt.Errorf("%w: %s is a string that is not JSON", errAbsent, p.prefix(i))
			}
		}
		switch {
		case len(cur) > 0 && cur[0] == '{':
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(cur, &obj); err != nil {
				return nil, err
			}
			v, ok := obj[seg]
			if !ok {
				return nil, fmt.Errorf("%w: %s has no member %q", errAbsent, p.prefix(i), seg)
			}
			cur = v
		case len(cur) > 0 && cur[0] == '[':
			var arr []json.RawMessage
			if err := json.Unmarshal(cur, &arr); err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(arr) {
				return nil, fmt.Errorf("%w: %s has no element %q", errAbsent, p.prefix(i), seg)
			}
			cur = arr[n]
		default:
			return nil, fmt.Errorf("%w: %s is not an object or array", errAbsent, p.prefix(i))
		}
	}
	return bytes.TrimSpace(cur), nil
}

// prefix names the part of the path before segment i: "the event" or
// the path's first i segments.
func (p path) prefix(i int) string {
	if i == 0 {
		return "the event"
	}
	return strconv.Quote(strings.Join(p.segments[:i], "."))
}

// keyAt returns the key the path names in doc: a string's text, or a
// number's JSON text. Any other value, or none, is an error wrapping
// ErrNoKey that names the path.
func (p path) keyAt(doc *document) (string, error) {
	raw, err := p.lookup(doc)
	if err != nil {
		return "", fmt.Errorf("%w: key path %q: %w", ErrNoKey, p.text, err)
	}
	switch {
	case len(raw) > 0 && raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%w: key path %q: %w", ErrNoKey, p.text, err)
		}
		if s == "" {
			return "", fmt.Errorf("%w: key path %q holds an empty string", ErrNoKey, p.text)
		}
		return s, nil
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		return string(raw), nil
	}
	kind := "null"
	switch {
	case len(raw) > 0 && raw[0] == '{':
		kind = "an object"
	case len(raw) > 0 && raw[0] == '[':
		kind = "an array"
	case len(raw) > 0 && (raw[0] == 't' || raw[0] == 'f'):
		kind = "a boolean"
	}
	return "", fmt.Errorf("%w: key path %q holds %s, not a string or number", ErrNoKey, p.text, kind)
}
