package idemhttp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/options"
)

// Requests a completer can finish.
//
// A request whose process dies (or whose lease ends) between two recovery
// points (idemkit.Step) is finished by its client's retry. When no retry
// comes, WithResume lets a completer finish it instead: the middleware
// stores the request with its claim (idemkit.WithInput), and Resumer
// gives the completer the function that serves it again through the
// handler, records its response as the middleware would, and so answers
// the client's late retry with it.

// resumeFormat is the first byte of a stored request; another value is
// refused by Resumer, so the format can change.
const resumeFormat = 1

// resumeMaxBody is the largest request body a route with WithResume reads
// by default: what idemkit.MaxInputLen holds with room for the method,
// the target and the stored headers.
const resumeMaxBody = idemkit.MaxInputLen - 8<<10

// neverStored are headers WithResume refuses to store: credentials, which
// a record must not hold, and the idempotency key, which is kept only as a
// digest (use idemkit.StepKey for an identity that a resumed request
// shares with its first run).
var neverStored = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// ErrNotResumable wraps the errors of a ResumeFunc made by Resumer for an
// input that is not a request stored by WithResume.
var ErrNotResumable = errors.New("idemhttp: not a request stored by WithResume")

// WithResume stores each first request of a key with its claim, under the
// operation name name, so that a completer (the completer package, or
// idemkit.Engine.Resume) can finish it if its client and the process that
// ran it are both gone: its method, target (path and query), the request
// headers named and its body. Resumer gives the completer the function
// that serves it again. name must have 1 to idemkit.MaxStepNameLen bytes
// of printable UTF-8. The headers are stored as they came, in the record,
// until the request completes: name those the handler needs (such as
// Content-Type, or the trusted header its principal comes from), never a
// credential: Authorization, Proxy-Authorization, Cookie and the key
// header are refused. A route with WithResume reads bodies of up to
// 56 KiB by default (WithMaxBody may lower it; a higher limit is refused),
// and answers 413 when the stored request would be over
// idemkit.MaxInputLen. Idempotency only.
func WithResume(name string, headers ...string) Option {
	headers = slices.Clone(headers)
	return func(c *config) error {
		if err := c.only("WithResume", modeKey); err != nil {
			return err
		}
		if c.resumeName != "" {
			return errors.New("WithResume: given twice; give the operation name and its headers once")
		}
		if !printable(name) {
			return fmt.Errorf("WithResume: the operation name must have 1 to %d bytes of printable UTF-8", idemkit.MaxStepNameLen)
		}
		for i, h := range headers {
			if !httpcore.ValidToken(h) {
				return fmt.Errorf("WithResume: invalid header name %q", h)
			}
			h = http.CanonicalHeaderKey(h)
			if slices.Contains(neverStored, h) {
				return fmt.Errorf("WithResume: header %s is a credential: it is never stored in a record", h)
			}
			headers[i] = h
		}
		c.resumeName, c.resumeHeaders = name, headers
		return nil
	}
}

// printable reports whether name has 1 to idemkit.MaxStepNameLen bytes
// of printable UTF-8, as idemkit.WithInput requires.
func printable(name string) bool {
	if name == "" || len(name) > idemkit.MaxStepNameLen || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// checkResume completes newConfig for WithResume: it refuses the key
// header among the stored headers and a body limit over what a record
// holds, and sets the default one.
func (c *config) checkResume() []error {
	if c.resumeName == "" {
		return nil
	}
	var errs []error
	if slices.Contains(c.resumeHeaders, c.keyHeader) {
		errs = append(errs, fmt.Errorf("WithResume: header %s is the idempotency key: it is never stored in a record (idemkit.StepKey is an identity the resumed request shares)", c.keyHeader))
	}
	switch {
	case !c.maxBodySet:
		c.maxBody = resumeMaxBody
	case c.maxBody > resumeMaxBody:
		errs = append(errs, fmt.Errorf("WithMaxBody(%d): over the %d bytes a request stored by WithResume may have", c.maxBody, resumeMaxBody))
	}
	return errs
}

// resumeInput returns the engine option that stores r (with body) for
// WithResume, or false when the stored request would be over
// idemkit.MaxInputLen.
func (c *config) resumeInput(r *http.Request, body []byte) (idemkit.Option, bool) {
	b := encodeRequest(r, c.resumeHeaders, body)
	if len(b) > idemkit.MaxInputLen {
		return nil, false
	}
	return idemkit.WithInput(c.resumeName, b), true
}

// encodeRequest encodes what WithResume stores of r: the format byte,
// then the method, the target and each stored header value as a
// length-prefixed name and value, a zero, and the body.
func encodeRequest(r *http.Request, headers []string, body []byte) []byte {
	b := make([]byte, 0, 64+len(body))
	b = append(b, resumeFormat)
	b = appendString(b, r.Method)
	b = appendString(b, r.URL.RequestURI())
	for _, name := range headers {
		for _, v := range r.Header[name] {
			b = appendString(b, name)
			b = appendString(b, v)
		}
	}
	b = binary.AppendUvarint(b, 0)
	return append(b, body...)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeRequest rebuilds the request encodeRequest stored, with ctx.
func decodeRequest(ctx context.Context, in []byte) (*http.Request, []byte, error) {
	if len(in) == 0 || in[0] != resumeFormat {
		return nil, nil, fmt.Errorf("%w: unknown format", ErrNotResumable)
	}
	d := in[1:]
	next := func() (string, bool) {
		n, k := binary.Uvarint(d)
		if k <= 0 || n > uint64(len(d)-k) {
			return "", false
		}
		s := string(d[k : k+int(n)])
		d = d[k+int(n):]
		return s, true
	}
	method, ok1 := next()
	target, ok2 := next()
	if !ok1 || !ok2 || method == "" {
		return nil, nil, fmt.Errorf("%w: truncated", ErrNotResumable)
	}
	h := http.Header{}
	for {
		name, ok := next()
		if !ok {
			return nil, nil, fmt.Errorf("%w: truncated", ErrNotResumable)
		}
		if name == "" {
			break
		}
		v, ok := next()
		if !ok {
			return nil, nil, fmt.Errorf("%w: truncated", ErrNotResumable)
		}
		h[name] = append(h[name], v)
	}
	body := d
	r, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNotResumable, err)
	}
	r.Header = h
	r.RequestURI = target
	r.RemoteAddr = "resumed"
	return r, body, nil
}

// Resumer returns the function that resumes the requests WithResume
// stores: register it in idemkit.Funcs under WithResume's name for the
// completer. It rebuilds the request (method, target, the stored headers
// and body; its context is the resumed claim's, so idemkit.Step and
// idemkit.StepKey work as in the first run), serves it with next, and
// returns the response encoded as the middleware stores it, so that the
// client's retry replays it. opts are the route's options, as given to
// Idempotency, WithResume among them: they say which responses are stored
// and how. A response the route would not store (a status outside
// WithStorePolicy, a stream) is an error, and the operation is released
// as the middleware would release it; a stored request it cannot read is
// an error wrapping ErrNotResumable. Resumer returns an error wrapping
// idemkit.ErrInvalid for a nil handler, invalid options or options
// without WithResume.
func Resumer(next http.Handler, opts ...Option) (idemkit.ResumeFunc, error) {
	if next == nil {
		return nil, fmt.Errorf("idemhttp: Resumer: %w: nil handler", idemkit.ErrInvalid)
	}
	c, err := newConfig(modeKey, opts)
	if err != nil {
		return nil, err
	}
	if c.resumeName == "" {
		return nil, fmt.Errorf("idemhttp: Resumer: %w", options.Invalid(errors.New("the options have no WithResume: nothing says which requests were stored")))
	}
	return func(ctx context.Context, input []byte) ([]byte, error) {
		r, body, err := decodeRequest(ctx, input)
		if err != nil {
			return nil, err
		}
		rec := newRecorder(&discardWriter{h: http.Header{}}, c)
		rb := reqBody{b: body, sent: len(body) > 0}
		enc, err := rec.serve(ctx, next, r, &rb)
		if errors.Is(err, errNotStored) {
			return nil, fmt.Errorf("idemhttp: the resumed request was answered %d, which the route does not store: %w", rec.status, err)
		}
		return enc, err
	}, nil
}

// discardWriter is the ResponseWriter of a resumed request, which has no
// client: the recorder keeps what is stored, the rest is dropped.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
