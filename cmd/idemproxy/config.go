package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/keying"

	"github.com/idemkit/idemkit/setup"
)

// errConfig marks an invalid configuration.
var errConfig = errors.New("invalid configuration")

// Route modes.
const (
	modeKey        = "key"
	modeWindow     = "window"
	modeToken      = "token"
	modeIssueToken = "issue-token"
	modePass       = "pass"
)

// Set-Cookie handling on guarded routes.
const (
	cookieFresh  = "fresh"  // on the fresh response only (the default)
	cookieReplay = "replay" // stored and replayed
	cookieStrip  = "strip"  // removed from every response of the route
)

// What a key keeps when its response is streamed or too large to store.
const (
	unstoredTerminal = "terminal" // a terminal record: retries get 500 response-not-stored (the default)
	unstoredRelease  = "release"  // released: a retry reaches the upstream again
)

// Principal sources.
const (
	sourceHeader = "header"
	sourceJWT    = "jwt"
	sourceMTLS   = "mtls"
)

// config is the proxy's configuration: the file, then the environment,
// then the flags.
type config struct {
	Listen          string   `toml:"listen"`
	Upstream        string   `toml:"upstream"`
	Store           string   `toml:"store"`
	KeySecretFile   string   `toml:"key_secret_file"` // the key secret's file (loadKeySecret)
	Namespace       string   `toml:"namespace"`
	HealthPath      string   `toml:"health_path"`
	MetricsPath     string   `toml:"metrics_path"`
	MaxBody         int64    `toml:"max_body"`
	UpstreamTimeout duration `toml:"upstream_timeout"`
	StoreBudget     duration `toml:"store_budget"`
	ShutdownTimeout duration `toml:"shutdown_timeout"`
	// ReadHeaderTimeout bounds reading a request's headers; BodyTimeout,
	// reading its body, from when the headers have been read.
	ReadHeaderTimeout duration `toml:"read_header_timeout"`
	BodyTimeout       duration `toml:"body_timeout"`
	LogLevel          string   `toml:"log_level"`
	// CaseSensitivePaths matches routes with case (see normalizePath).
	CaseSensitivePaths bool         `toml:"case_sensitive_paths"`
	Principal          principalCfg `toml:"principal"`
	TLS                tlsCfg       `toml:"tls"`
	Routes             []routeCfg   `toml:"route"`

	// keySecret is the key secret loaded by loadKeySecret, or nil. It is
	// never printed.
	keySecret []byte
}

type principalCfg struct {
	Source string `toml:"source"`
	Header string `toml:"header"`
	JWT    jwtCfg `toml:"jwt"`
}

type jwtCfg struct {
	Algorithms    []string `toml:"algorithms"`
	PublicKeyFile string   `toml:"public_key_file"`
	JWKSFile      string   `toml:"jwks_file"`
	HMACKeyFile   string   `toml:"hmac_key_file"`
	Claim         string   `toml:"claim"`
	Issuer        string   `toml:"issuer"`
	Audience      string   `toml:"audience"`
	Leeway        duration `toml:"leeway"`
}

type tlsCfg struct {
	CertFile     string `toml:"cert_file"`
	KeyFile      string `toml:"key_file"`
	ClientCAFile string `toml:"client_ca_file"`
}

type routeCfg struct {
	Match         string   `toml:"match"`
	Mode          string   `toml:"mode"`
	Failure       string   `toml:"failure"`
	Fallback      bool     `toml:"fallback"`
	Window        duration `toml:"window"`
	Lease         duration `toml:"lease"`
	Retention     duration `toml:"retention"`
	TokenTTL      duration `toml:"token_ttl"`
	Wait          bool     `toml:"wait"`
	MaxBody       int64    `toml:"max_body"`
	BodyTimeout   duration `toml:"body_timeout"`
	ReplayHeaders []string `toml:"replay_headers"`
	SetCookie     string   `toml:"set_cookie"`
	OptionalKey   bool     `toml:"optional_key"`
	TokenField    string   `toml:"token_field"`
	PayloadWindow duration `toml:"payload_window"`
	MaxStored     int      `toml:"max_stored_response"`
	Unstored      string   `toml:"unstored"`
	// Callbacks in (docs/callbacks.md): where the key is read from
	// ("json:PATH", "header:NAME" or "query:NAME"; the Idempotency-Key
	// header when empty), the body members that must match (include) or
	// are ignored (volatile), the callback profile, and a signature
	// check that replaces the principal source for the route.
	KeyFrom   string        `toml:"key_from"`
	Include   []string      `toml:"include"`
	Volatile  []string      `toml:"volatile"`
	Callback  bool          `toml:"callback"`
	Signature *signatureCfg `toml:"signature"`
}

// signatureCfg is a route's webhook signature check
// (idemhttp.SignedPrincipal); the secret is read from secret_file at
// startup and never printed.
type signatureCfg struct {
	Sender          string   `toml:"sender"`
	SecretFile      string   `toml:"secret_file"`
	Header          string   `toml:"header"`
	Prefix          string   `toml:"prefix"`
	TimestampHeader string   `toml:"timestamp_header"`
	Tolerance       duration `toml:"tolerance"`

	secret []byte // loaded by check
}

// duration is a time.Duration written as a string ("5s", "24h").
type duration struct{ time.Duration }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// defaults is the configuration before the file.
func defaults() config {
	return config{
		Listen:            "127.0.0.1:8080",
		Store:             "mem://",
		Namespace:         "idem",
		HealthPath:        "/healthz",
		MetricsPath:       "/metrics",
		MaxBody:           1 << 20,
		UpstreamTimeout:   duration{30 * time.Second},
		StoreBudget:       duration{time.Second},
		ShutdownTimeout:   duration{10 * time.Second},
		ReadHeaderTimeout: duration{10 * time.Second},
		BodyTimeout:       duration{30 * time.Second},
		LogLevel:          "info",
	}
}

// loadFile decodes a TOML file over c. Keys the configuration does not
// know are refused: a misspelt option must not be silently ignored.
func loadFile(c *config, path string) error {
	md, err := toml.DecodeFile(path, c)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errConfig, path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return fmt.Errorf("%w: %s: unknown key(s) %s", errConfig, path, strings.Join(keys, ", "))
	}
	return nil
}

// check validates c and fills in route defaults.
func (c *config) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Upstream == "" {
		bad("upstream is required")
	} else if err := checkUpstream(c.Upstream); err != nil {
		errs = append(errs, err)
	}
	if !strings.HasPrefix(c.HealthPath, "/") {
		bad("health_path %q must start with /", c.HealthPath)
	}
	if !strings.HasPrefix(c.MetricsPath, "/") || c.MetricsPath == c.HealthPath {
		bad("metrics_path %q must start with / and differ from health_path", c.MetricsPath)
	}
	if c.MaxBody <= 0 {
		bad("max_body must be positive, got %d", c.MaxBody)
	}
	for _, d := range []struct {
		name string
		d    duration
	}{{"upstream_timeout", c.UpstreamTimeout}, {"store_budget", c.StoreBudget}, {"shutdown_timeout", c.ShutdownTimeout},
		{"read_header_timeout", c.ReadHeaderTimeout}, {"body_timeout", c.BodyTimeout}} {
		if d.d.Duration <= 0 {
			bad("%s must be positive, got %v", d.name, d.d.Duration)
		}
	}
	errs = append(errs, c.checkPrincipal()...)
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("tls: cert_file and key_file go together")
	}
	if c.TLS.ClientCAFile != "" && c.TLS.CertFile == "" {
		bad("tls: client_ca_file needs cert_file and key_file")
	}
	seen := map[string]bool{}
	for i := range c.Routes {
		r := &c.Routes[i]
		if seen[r.Match] {
			bad("route %d: %q is matched twice", i+1, r.Match)
		}
		seen[r.Match] = true
		for _, err := range r.check(c) {
			bad("route %d (%s): %w", i+1, r.Match, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w:\n%w", errConfig, err)
	}
	return nil
}

// checkUpstream checks the upstream URL. Its errors never hold the URL:
// it may carry credentials, which are refused. The proxy does not send
// credentials of its own to the upstream (the ReverseProxy drops user
// information); a service that needs them is reached through a gateway
// that adds them, or authenticates the proxy by mTLS or network.
func checkUpstream(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("upstream is not a URL (it is not repeated here: it may hold a password)")
	case u.User != nil:
		return errors.New("upstream must not hold credentials (user:password@): the proxy never sends them; remove them from the URL")
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("upstream %q must be an http:// or https:// URL with a host", u.Redacted())
	}
	return nil
}

func (c *config) checkPrincipal() []error {
	p := &c.Principal
	var errs []error
	switch p.Source {
	case "":
		if c.guarded() {
			errs = append(errs, errors.New("principal.source is required when a route is guarded (header, jwt or mtls)"))
		}
	case sourceHeader:
		if p.Header == "" || !validToken(p.Header) {
			errs = append(errs, fmt.Errorf("principal.header %q must be a header name", p.Header))
		}
	case sourceJWT:
		if p.JWT.Claim == "" {
			p.JWT.Claim = "sub"
		}
		if len(p.JWT.Algorithms) == 0 {
			errs = append(errs, errors.New("principal.jwt.algorithms is required (HS256, RS256, ES256)"))
		}
		for _, a := range p.JWT.Algorithms {
			if !slices.Contains([]string{"HS256", "RS256", "ES256"}, a) {
				errs = append(errs, fmt.Errorf("principal.jwt.algorithms: %q is not one of HS256, RS256, ES256", a))
			}
		}
		if p.JWT.PublicKeyFile == "" && p.JWT.JWKSFile == "" && p.JWT.HMACKeyFile == "" {
			errs = append(errs, errors.New("principal.jwt needs public_key_file, jwks_file or hmac_key_file"))
		}
	case sourceMTLS:
		if c.TLS.ClientCAFile == "" {
			errs = append(errs, errors.New("principal.source mtls needs tls.client_ca_file"))
		}
	default:
		errs = append(errs, fmt.Errorf("principal.source %q is not header, jwt or mtls", p.Source))
	}
	return errs
}

// guarded reports whether any route needs the principal source: a
// guarded route without a signature check of its own.
func (c *config) guarded() bool {
	for _, r := range c.Routes {
		if r.Mode != modePass && r.Signature == nil {
			return true
		}
	}
	return false
}

// hopByHop lists headers that belong to one connection (RFC 9110 7.6.1)
// or to the framing of one message: never stored or replayed.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length"}

func (r *routeCfg) check(c *config) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	method, path, ok := strings.Cut(r.Match, " ")
	if !ok || !validToken(method) || !strings.HasPrefix(path, "/") {
		bad("match must be a method and a path pattern, such as \"POST /orders/{id}\"")
	} else if path != "/" && path != "/{$}" && (strings.HasSuffix(path, "/") || strings.HasSuffix(path, "/{$}")) {
		bad("the path must not end in / or /{$}: request paths are matched without a trailing slash (use {name...} for a subtree)")
	}
	if path == c.HealthPath || path == c.MetricsPath {
		bad("the path is the proxy's health_path or metrics_path")
	}
	switch r.Mode {
	case modeKey, modeWindow, modeToken, modeIssueToken, modePass:
	default:
		bad("mode %q is not key, window, token, issue-token or pass", r.Mode)
	}
	switch r.Failure {
	case "":
		r.Failure = "closed"
	case "closed", "open":
	default:
		bad("failure %q is not closed or open", r.Failure)
	}
	switch r.SetCookie {
	case "":
		r.SetCookie = cookieFresh
	case cookieFresh, cookieReplay, cookieStrip:
	default:
		bad("set_cookie %q is not fresh, replay or strip", r.SetCookie)
	}
	if r.MaxBody < 0 {
		bad("max_body must be positive, got %d", r.MaxBody)
	} else if r.MaxBody == 0 {
		r.MaxBody = c.MaxBody
	}
	for _, h := range r.ReplayHeaders {
		ch := http.CanonicalHeaderKey(h)
		switch {
		case !validToken(h):
			bad("replay_headers: %q is not a header name", h)
		case slices.Contains(hopByHop, ch):
			bad("replay_headers: %s is a hop-by-hop or framing header and is never replayed", ch)
		case ch == "Set-Cookie":
			bad(`replay_headers: use set_cookie = "replay" for Set-Cookie`)
		}
	}
	for _, d := range []struct {
		name string
		d    duration
	}{{"window", r.Window}, {"lease", r.Lease}, {"retention", r.Retention}, {"token_ttl", r.TokenTTL}, {"body_timeout", r.BodyTimeout}} {
		if d.d.Duration < 0 {
			bad("%s must be positive, got %v", d.name, d.d.Duration)
		}
	}
	if r.BodyTimeout.Duration == 0 {
		r.BodyTimeout = c.BodyTimeout
	}
	if r.Mode != modeWindow && r.Window.Duration != 0 {
		bad("window applies to mode window only")
	}
	if r.OptionalKey && r.Mode != modeKey {
		bad("optional_key applies to mode key only")
	}
	if r.TokenField != "" && r.Mode != modeToken {
		bad("token_field applies to mode token only")
	}
	if r.PayloadWindow.Duration < 0 || (r.PayloadWindow.Duration != 0 && r.Mode != modeKey) {
		bad("payload_window must be positive and applies to mode key only")
	}
	if r.MaxStored < 0 {
		bad("max_stored_response must be positive, got %d", r.MaxStored)
	}
	errs = append(errs, r.checkCallback()...)
	switch r.Unstored {
	case "":
		r.Unstored = unstoredTerminal
	case unstoredTerminal, unstoredRelease:
	default:
		bad("unstored %q is not terminal or release", r.Unstored)
	}
	return errs
}

// validToken reports whether s is a non-empty RFC 9110 token (a method or
// a header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// fromEnv applies the IDEMPROXY_* variables that are set, and
// IDEMKIT_STORE, the store variable every program of the project reads,
// when IDEMPROXY_STORE is not set.
func (c *config) fromEnv(getenv func(string) string) {
	if v := getenv("IDEMKIT_STORE"); v != "" {
		c.Store = v
	}
	for name, dst := range map[string]*string{
		"IDEMPROXY_LISTEN":   &c.Listen,
		"IDEMPROXY_UPSTREAM": &c.Upstream,
		"IDEMPROXY_STORE":    &c.Store,
	} {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
}

// loadKeySecret loads the key secret the way every program of the project
// does (setup.LoadKeySecret): the text of IDEMKIT_KEY_SECRET, or the file
// named by IDEMKIT_KEY_SECRET_FILE, and when neither variable is set the
// file named by key_secret_file. Both variables set, an unreadable file and
// a secret shorter than idemkit.MinKeySecretLen bytes are configuration
// errors, which never hold the secret.
func (c *config) loadKeySecret(getenv func(string) string) error {
	text, path := getenv(setup.EnvKeySecret), getenv(setup.EnvKeySecretFile)
	if text == "" && path == "" {
		path = c.KeySecretFile
	}
	secret, err := setup.LoadKeySecret(text, path)
	if err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	c.keySecret = secret
	return nil
}

// readSecretFile reads a file that holds key material; its name, not its
// content, goes into errors.
func readSecretFile(what, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errConfig, what, err)
	}
	return b, nil
}

// checkCallback checks the route's callback settings and loads its
// signature secret.
func (r *routeCfg) checkCallback() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r.KeyFrom != "" {
		kind, name, _ := strings.Cut(r.KeyFrom, ":")
		switch {
		case r.Mode != modeKey:
			bad("key_from applies to mode key only")
		case kind != "json" && kind != "header" && kind != "query" || name == "":
			bad("key_from %q is not json:PATH, header:NAME or query:NAME", r.KeyFrom)
		case kind == "json":
			if _, err := keying.NewKeyPath(name); err != nil {
				bad("key_from: %v", err)
			}
		case kind == "header" && !validToken(name):
			bad("key_from: %q is not a header name", name)
		}
	}
	if len(r.Include) > 0 || len(r.Volatile) > 0 {
		opts := []keying.Option{keying.WithVolatile(r.Volatile...)}
		if len(r.Include) > 0 {
			opts = append(opts, keying.WithInclude(r.Include...))
		}
		if _, err := keying.NewFingerprinter(opts...); err != nil {
			bad("include or volatile: %v", err)
		}
	}
	if len(r.Include) > 0 && r.Mode != modeKey && r.Mode != modeWindow {
		bad("include applies to modes key and window only")
	}
	if len(r.Volatile) > 0 && r.Mode != modeKey && r.Mode != modeWindow {
		bad("volatile applies to modes key and window only")
	}
	if r.Callback && r.Mode != modeKey {
		bad("callback applies to mode key only")
	}
	if r.Callback && r.OptionalKey {
		bad("callback and optional_key cannot be combined: a callback without its key is refused")
	}
	if s := r.Signature; s != nil {
		if r.Mode == modePass {
			bad("signature applies to guarded routes only")
		}
		if s.Sender == "" {
			bad("signature.sender is required: the principal of a signed request")
		}
		if s.SecretFile == "" {
			bad("signature.secret_file is required")
		} else if b, err := readSecretFile("signature.secret_file", s.SecretFile); err != nil {
			errs = append(errs, err)
		} else {
			s.secret = bytes.TrimRight(b, "\r\n")
			if len(s.secret) < idemhttp.MinSecretLen {
				bad("signature.secret_file holds %d bytes, at least %d required", len(s.secret), idemhttp.MinSecretLen)
			}
		}
	}
	return errs
}
