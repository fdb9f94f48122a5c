package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Opener opens a store from a parsed URL of the scheme it was registered
// for. It returns an error wrapping ErrInvalid for a URL it cannot use,
// naming the offending part but never a secret (use Redact on any URL it
// quotes). Query parameters it does not know must be refused, not ignored:
// Params helps.
type Opener func(ctx context.Context, u *url.URL) (Store, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
)

// ErrUnknownScheme reports a store URL whose scheme no imported backend
// registered. It wraps ErrInvalid.
var ErrUnknownScheme = fmt.Errorf("%w: unknown store URL scheme", ErrInvalid)

// Register makes a backend available to Open under a URL scheme, as
// database/sql.Register does for drivers. Backends call it from an init
// function, so a blank import of the backend's package brings the scheme
// in. It panics if open is nil, the scheme is not a valid lower-case URL
// scheme, or the scheme is already registered: all programming errors.
func Register(scheme string, open Opener) {
	if open == nil {
		panic("store: Register of a nil Opener for scheme " + scheme)
	}
	if !validScheme(scheme) {
		panic(fmt.Sprintf("store: Register of invalid scheme %q", scheme))
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[scheme]; dup {
		panic("store: Register called twice for scheme " + scheme)
	}
	registry[scheme] = open
}

// validScheme reports whether s is a lower-case URL scheme (RFC 3986).
func validScheme(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open opens a store from a URL such as "mem://", "bolt:///var/lib/app/idem.db"
// or "redis://:secret@localhost:6379/0", using the backend registered for
// its scheme. Errors wrap ErrInvalid for a URL that cannot be used
// (ErrUnknownScheme for an unregistered scheme) or ErrUnavailable for a
// backend that cannot be reached; their texts never hold the URL's
// password or other secret query parameters.
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error quotes the whole URL, password included: say only
		// what is wrong.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		// The parser's detail quotes the part it stopped at, which can be
		// a piece of a password holding a reserved character
		// (redis://:ab/cd@host stops at port "ab"): say where, not what.
		detail := quoted.ReplaceAllString(err.Error(), "(…)")
		return nil, fmt.Errorf("store: open %s: %w: %s (percent-encode / ? # @ : in a password)", Redact(rawURL), ErrInvalid, detail)
	}
	if _, err := Query(u); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", Redact(rawURL), err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("store: open %s: %w: a store URL needs a scheme (%s)", Redact(rawURL), ErrInvalid, strings.Join(Schemes(), "://, ")+"://")
	}
	registryMu.RLock()
	open := registry[u.Scheme]
	registryMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("store: open %s: %w %q (registered: %s; a backend registers its scheme when its package is imported)",
			Redact(rawURL), ErrUnknownScheme, u.Scheme, strings.Join(Schemes(), ", "))
	}
	return open(ctx, u)
}

// quoted matches a Go-quoted string in an error text.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// secretWords are the parts of a query parameter's name that make Redact
// hide its value: any parameter named like a password or a credential,
// whichever backend reads it (libpq's sslpassword, a misspelt passwrd).
var secretWords = []string{"pass", "pwd", "secret", "token"}

// secretParam reports whether the query parameter name holds a secret.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return n == "key" || strings.HasSuffix(n, "_key")
}

// Redact returns rawURL with its password (or a user name given without
// one) and the values of query parameters named like a secret (holding
// "pass", "pwd", "secret" or "token", or named key or *_key) replaced by
// "xxxxx", for error texts, logs and String methods. A URL that does not
// parse is reduced to its scheme.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		scheme, _, ok := strings.Cut(rawURL, "://")
		if !ok || !validScheme(strings.ToLower(scheme)) {
			return "<unparsable URL>"
		}
		return strings.ToLower(scheme) + "://<unparsable URL>"
	}
	if u.Opaque != "" { // "host:port" parses as scheme "host"
		return u.Scheme + ":xxxxx"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	} else if u.User != nil && u.User.Username() != "" {
		// A user name without a password is most often a password written
		// in the user's place (redis://SECRET@host).
		u.User = url.User("xxxxx")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		u.RawQuery = redactRawQuery(u.RawQuery)
		return asGiven(rawURL, u)
	}
	hidden := false
	for name := range q {
		if secretParam(name) {
			q.Set(name, "xxxxx")
			hidden = true
		}
	}
	if hidden {
		u.RawQuery = q.Encode()
	}
	return asGiven(rawURL, u)
}

// asGiven returns u written out, with the "//" that url.URL.String drops
// from a URL with neither host nor path put back when rawURL had it:
// mem:// stays mem://, where net/url writes mem:.
func asGiven(rawURL string, u *url.URL) string {
	s := u.String()
	if u.Scheme == "" {
		return s
	}
	_, rest, _ := strings.Cut(rawURL, ":")
	if !strings.HasPrefix(rest, "//") {
		return s
	}
	if after, ok := strings.CutPrefix(s, u.Scheme+":"); ok && !strings.HasPrefix(after, "//") {
		return u.Scheme + "://" + after
	}
	return s
}

// redactRawQuery hides the secret values of a query that url.ParseQuery
// refuses (a ';', a bad percent-escape), keeping its text otherwise. Each
// '&'-separated pair is read as ';'-separated ones too, as some parsers
// do; a secret's value is hidden up to the next '&', so that no part of
// a value holding a ';' shows.
func redactRawQuery(raw string) string {
	pairs := strings.Split(raw, "&")
	for i, pair := range pairs {
		parts := strings.Split(pair, ";")
		for j, part := range parts {
			name, _, _ := strings.Cut(part, "=")
			if n, err := url.QueryUnescape(name); err == nil {
				name = n
			}
			if secretParam(name) {
				parts = append(parts[:j], strings.SplitN(part, "=", 2)[0]+"=xxxxx")
				break
			}
		}
		pairs[i] = strings.Join(parts, ";")
	}
	return strings.Join(pairs, "&")
}

// Query returns the query parameters of u, as u.Query does, but refuses
// with an error wrapping ErrInvalid what u.Query drops without a word: a
// pair holding a ';' (which Go no longer takes as a separator), or a
// malformed percent-escape. The error names the parameters concerned but
// no value. Store URL parsers use it, or Params, never u.Query.
func Query(u *url.URL) (url.Values, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err == nil {
		return q, nil
	}
	var names []string
	bad := ";"
	if !strings.Contains(u.RawQuery, ";") {
		bad = "%"
	}
	for pair := range strings.SplitSeq(u.RawQuery, "&") {
		if !strings.Contains(pair, bad) {
			continue
		}
		name, _, _ := strings.Cut(pair, "=")
		name, _, _ = strings.Cut(name, ";")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		names = append(names, strconv.Quote(name))
	}
	where := "parameter(s) " + strings.Join(names, ", ")
	if bad == ";" {
		return nil, fmt.Errorf("%w: %s: a ';' in the query, which Go's URL parser would drop with its pair: separate parameters with '&', and write a ';' in a value as %%3B", ErrInvalid, where)
	}
	return nil, fmt.Errorf("%w: %s: a malformed percent-escape in the query ('%%' must start %%XX; write a '%%' in a value as %%25)", ErrInvalid, where)
}

// Params reads a store URL's query parameters and makes sure every one of
// them was read: a backend takes each parameter it knows with String, then
// calls Done, which reports the ones it did not take.
type Params struct {
	q    url.Values
	used map[string]bool
	err  error // the query does not parse (see Query)
}

// NewParams returns the query parameters of u. A parameter given twice is
// an error when read. A query that Query refuses makes every read, and
// Done, return Query's error.
func NewParams(u *url.URL) *Params {
	q, err := Query(u)
	return &Params{q: q, used: map[string]bool{}, err: err}
}

// String returns the value of parameter name and whether it was given. A
// parameter given more than once is an error wrapping ErrInvalid.
func (p *Params) String(name string) (string, bool, error) {
	p.used[name] = true
	if p.err != nil {
		return "", false, p.err
	}
	vs, ok := p.q[name]
	switch {
	case !ok:
		return "", false, nil
	case len(vs) > 1:
		return "", false, fmt.Errorf("%w: parameter %q given %d times", ErrInvalid, name, len(vs))
	}
	return vs[0], true, nil
}

// Done returns an error wrapping ErrInvalid that names every parameter
// that was given but never read, or nil.
func (p *Params) Done() error {
	if p.err != nil {
		return p.err
	}
	var unknown []string
	for name := range p.q {
		if !p.used[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("%w: unknown parameter(s) %s", ErrInvalid, strings.Join(unknown, ", "))
}
