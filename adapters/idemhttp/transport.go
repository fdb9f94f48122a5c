package idemhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/backoff"
	"github.com/idemkit/idemkit/keying"
)

// Defaults of Transport, used for fields left at zero.
const (
	DefaultMaxRetries = 3
	DefaultMinBackoff = backoff.DefaultMin // the same for every idemkit client
	DefaultMaxBackoff = backoff.DefaultMax
)

// NoRetries disables retries when set as Transport.MaxRetries (whose 0
// means DefaultMaxRetries).
const NoRetries = -1

// Transport is an http.RoundTripper that makes unsafe requests safe to
// retry: it adds a fresh Idempotency-Key (an sf-string) to POST and PATCH
// requests that carry none, and retries with the same key after a network
// error, a 503, or a 409 saying the first attempt is still in progress
// (problem type "in-progress", or any 409 with Retry-After and no problem
// body). It retries only what cannot run twice (a keyed request or an
// idempotent method) and can be resent (no body, or GetBody set), waiting
// with jittered exponential backoff or the server's Retry-After; a
// Retry-After over MaxBackoff, or the request's context, ends the retries.
// With FenceHeader set, a request sent by the work of an idemkit claim
// also carries the claim's fencing token.
//
// The zero value is ready to use: a field left at its zero value takes its
// default. An invalid field (see Validate) is never clamped: RoundTrip
// returns the error and sends nothing. A Transport is safe for concurrent
// use.
type Transport struct {
	// Base sends each attempt (default http.DefaultTransport).
	Base http.RoundTripper
	// MaxRetries is the number of retries after the first attempt:
	// 0 means DefaultMaxRetries, NoRetries disables retries; below
	// NoRetries is invalid.
	MaxRetries int
	// MinBackoff is the first retry delay (0 means DefaultMinBackoff);
	// it doubles with every retry. Negative, or over MaxBackoff, is
	// invalid.
	MinBackoff time.Duration
	// MaxBackoff caps the retry delay and the Retry-After the transport
	// waits for (0 means DefaultMaxBackoff). Negative is invalid.
	MaxBackoff time.Duration
	// KeyHeader is the idempotency key header ("" means
	// DefaultKeyHeader); it must be a valid header name.
	KeyHeader string
	// Methods get a key when they have none: nil means POST and PATCH,
	// an empty slice none. Each must be a valid method token.
	Methods []string
	// NewKey makes a key (default keying.NewToken).
	NewKey func() (string, error)
	// FenceHeader, when set, is the request header that carries the
	// fencing token of the idemkit claim whose work sends the request
	// (idemkit.FenceFromContext of the request's context), in decimal,
	// on every attempt. A request sent outside such work, or that
	// already carries the header, is sent without it being added. ""
	// (the default) sends no token. It must be a valid header name other
	// than the key header; FenceHeader is a suggested name. The service
	// reads it with FenceFromRequest and refuses a token lower than the
	// highest it has seen for the idempotency key: the request then comes
	// from a caller whose claim was taken over after its lease ended.
	FenceHeader string
}

// Validate reports whether t's fields are valid; the error wraps
// idemkit.ErrInvalid and names the field. RoundTrip calls it before
// sending anything; call it at start-up to fail early.
func (t *Transport) Validate() error {
	switch minB, maxB := t.minBackoff(), t.maxBackoff(); {
	case t.MaxRetries < NoRetries:
		return invalidTransport("MaxRetries %d is below NoRetries", t.MaxRetries)
	case t.MinBackoff < 0:
		return invalidTransport("MinBackoff %v is negative", t.MinBackoff)
	case t.MaxBackoff < 0:
		return invalidTransport("MaxBackoff %v is negative", t.MaxBackoff)
	case minB > maxB:
		return invalidTransport("MinBackoff %v is over MaxBackoff %v (a zero field takes its default)", minB, maxB)
	case t.KeyHeader != "" && !httpcore.ValidToken(t.KeyHeader):
		return invalidTransport("KeyHeader %q is not a header name", t.KeyHeader)
	case t.FenceHeader != "" && !httpcore.ValidToken(t.FenceHeader):
		return invalidTransport("FenceHeader %q is not a header name", t.FenceHeader)
	case strings.EqualFold(t.FenceHeader, t.keyHeader()):
		return invalidTransport("FenceHeader %q is the key header", t.FenceHeader)
	}
	for _, m := range t.Methods {
		if !httpcore.ValidToken(m) {
			return invalidTransport("Methods holds %q, not a method", m)
		}
	}
	return nil
}

func invalidTransport(format string, args ...any) error {
	return fmt.Errorf("idemhttp: %w: Transport."+format, append([]any{idemkit.ErrInvalid}, args...)...)
}

// RoundTrip implements http.RoundTripper. It never modifies req: a request
// that gets a key or a fencing token is cloned first. An invalid Transport (Validate) returns
// the error, having sent nothing.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.Validate(); err != nil {
		closeBody(req)
		return nil, err
	}
	sent, keyed, err := t.withKey(req)
	if err != nil {
		return nil, err
	}
	req = t.withFence(req, sent)
	retries := t.retries()
	if retries == 0 || !retryable(req, keyed) {
		return t.base().RoundTrip(req)
	}
	for attempt := 0; ; attempt++ {
		resp, err := t.base().RoundTrip(req)
		if attempt == retries {
			return resp, err
		}
		wait, again := t.decide(req.Context(), resp, err, attempt)
		if !again {
			return resp, err
		}
		next, gerr := rewind(req)
		if gerr != nil {
			return resp, err
		}
		discard(resp)
		if serr := sleep(req.Context(), wait); serr != nil {
			closeBody(next)
			return nil, fmt.Errorf("idemhttp: retry abandoned: %w", errors.Join(serr, err))
		}
		req = next
	}
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// retries is the number of retries of a valid Transport.
func (t *Transport) retries() int {
	switch t.MaxRetries {
	case NoRetries:
		return 0
	case 0:
		return DefaultMaxRetries
	}
	return t.MaxRetries
}

func (t *Transport) keyHeader() string {
	if t.KeyHeader != "" {
		return t.KeyHeader
	}
	return DefaultKeyHeader
}

// withKey returns req, or a clone of it with a fresh key when its method
// needs one. keyed reports whether the request to send carries a key.
func (t *Transport) withKey(req *http.Request) (*http.Request, bool, error) {
	name := t.keyHeader()
	if req.Header.Get(name) != "" {
		return req, true, nil
	}
	methods := t.Methods
	if methods == nil {
		methods = []string{http.MethodPost, http.MethodPatch}
	}
	if !slices.Contains(methods, req.Method) {
		return req, false, nil
	}
	newKey := t.NewKey
	if newKey == nil {
		newKey = keying.NewToken
	}
	key, err := newKey()
	if err != nil {
		closeBody(req)
		return nil, false, fmt.Errorf("idemhttp: idempotency key: %w", err)
	}
	clone := req.Clone(req.Context())
	if clone.Header == nil { // valid for http.Transport; Clone keeps it nil
		clone.Header = make(http.Header)
	}
	clone.Header.Set(name, sfString(key))
	return clone, true, nil
}

// withFence returns sent, the request to send for the caller's req, with
// the fencing token of the claim in its context when FenceHeader is set,
// cloning req first.
func (t *Transport) withFence(req, sent *http.Request) *http.Request {
	if t.FenceHeader == "" {
		return sent
	}
	fence, ok := idemkit.FenceFromContext(sent.Context())
	if !ok || len(sent.Header.Values(t.FenceHeader)) > 0 {
		return sent
	}
	if sent == req {
		sent = req.Clone(req.Context())
		if sent.Header == nil {
			sent.Header = make(http.Header)
		}
	}
	sent.Header.Set(t.FenceHeader, keying.FormatFence(fence))
	return sent
}

// sfString writes s as an RFC 8941 sf-string.
func sfString(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// retryable reports whether sending req twice is harmless and possible.
func retryable(req *http.Request, keyed bool) bool {
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return replayable
	}
	return keyed && replayable
}

// decide says whether an attempt's outcome is worth a retry, and after how
// long.
func (t *Transport) decide(ctx context.Context, resp *http.Response, err error, attempt int) (time.Duration, bool) {
	if err != nil {
		return t.backoff(attempt), ctx.Err() == nil
	}
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
	case http.StatusConflict:
		if !inProgress(resp) {
			return 0, false
		}
	default:
		return 0, false
	}
	wait, given := retryAfter(resp.Header.Get("Retry-After"))
	if !given {
		return t.backoff(attempt), true
	}
	return wait, wait <= t.maxBackoff()
}

// minBackoff and maxBackoff are the backoff bounds, a zero field taking
// its default.
func (t *Transport) minBackoff() time.Duration {
	if t.MinBackoff == 0 {
		return DefaultMinBackoff
	}
	return t.MinBackoff
}

func (t *Transport) maxBackoff() time.Duration {
	if t.MaxBackoff == 0 {
		return DefaultMaxBackoff
	}
	return t.MaxBackoff
}

// backoff returns the delay before retry attempt+1 (internal/backoff's
// schedule from MinBackoff to MaxBackoff).
func (t *Transport) backoff(attempt int) time.Duration {
	return backoff.Delay(t.minBackoff(), t.maxBackoff(), attempt)
}

// retryAfter parses a Retry-After value: delay seconds or an HTTP date.
func retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
		return time.Duration(min(secs, 1<<30)) * time.Second, true
	}
	if when, err := http.ParseTime(v); err == nil {
		return max(time.Until(when), 0), true
	}
	return 0, false
}

// inProgress reports whether a 409 says the first request with the key is
// still running: a problem of type ProblemInProgress, or a 409 that is not
// a problem document and carries Retry-After. It restores the body it
// peeks at.
func inProgress(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != ProblemContentType {
		return resp.Header.Get("Retry-After") != ""
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(head), resp.Body), Closer: resp.Body}
	if err != nil {
		return false
	}
	var p Problem
	return json.Unmarshal(head, &p) == nil && isProblem(p.Type, httpcore.KindInProgress)
}

// isProblem reports whether the type URI typ names the problem kind k
// under any base (WithProblemBase).
func isProblem(typ string, k httpcore.Kind) bool {
	name := k.Type().Name
	return len(typ) > len(name) && strings.HasSuffix(typ, name) && strings.ContainsRune("/#:", rune(typ[len(typ)-len(name)-1]))
}

type peekedBody struct {
	io.Reader
	io.Closer
}

// rewind returns a copy of req with a fresh body for the next attempt.
func rewind(req *http.Request) (*http.Request, error) {
	next := new(http.Request)
	*next = *req
	if req.Body == nil || req.Body == http.NoBody {
		return next, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	next.Body = body
	return next, nil
}

// discard drains a little of a response that will not be returned, so its
// connection can be reused, and closes it.
func discard(resp *http.Response) {
	if resp == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
