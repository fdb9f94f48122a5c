// Package idemecho puts an idemkit.Engine in front of Echo v5 handlers,
// with the same modes, HTTP contract and problem documents as
// adapters/idemhttp, as Echo middleware.
//
// It is a nested module, so Echo never enters the idemkit module's
// dependencies.
//
//	guard, err := idemecho.Idempotency(engine, idemecho.WithPrincipal(idemecho.ContextPrincipal("user")))
//	e.POST("/orders", createOrder, auth, guard)
//
// # Echo v5
//
// The package is written for github.com/labstack/echo/v5, not v4: v5 is
// the major Echo's maintainers name for new projects (their v4 support
// announcement: v4 gets bug fixes until 2026-12-31 and security fixes
// only after that), and its *echo.Context, slog logging and
// http.ResponseWriter-based Response are what this middleware uses.
// Applications still on v4 can use adapters/idemhttp around their
// handlers until they move.
//
// # Modes
//
//   - Idempotency: the client sends an Idempotency-Key. The first request
//     runs the next handler and its response is stored; a retry with the
//     key gets the stored status, allow-listed headers (Content-Type,
//     Content-Encoding, Location and WithReplayHeaders) and body, byte for
//     byte, with Idempotent-Replayed: true; a concurrent retry gets 409
//     in-progress with Retry-After (or, with
//     WithWait, the response once stored); a
//     retry with another payload (method, route, path, query parameters
//     (all, or those WithQueryParams names), canonical JSON body, or what
//     WithFingerprinter compares) 422.
//   - Window: no client key. A repeat of the same request (principal,
//     method, route, path, canonical body without keying.WindowVolatile
//     members) inside the engine's window gets 409 duplicate with
//     Retry-After. Nothing is stored.
//   - Token: a one-time token (TokenIssuer, or Engine.IssueToken rendered
//     into a page) bound to the principal is spent before the handler
//     runs; a reuse gets the first outcome, or 409 token-used.
//
// Only guarded methods (POST and PATCH by default, WithMethods) are
// checked, and requests for which the Skipper (WithSkipper, Echo's
// middleware.Skipper convention) returns true pass untouched. The key is
// claimed in the engine's store before the handler runs, so instances
// sharing one store (Redis, SQL) run the handler once per key.
//
// # Echo's context and errors
//
// Register the middleware on the route (e.POST(path, h, auth, guard)),
// after the middleware that authenticates, so that c.Path(), part of every
// fingerprint, names the route and ContextPrincipal finds what it set with
// c.Set. The handler writes through a writer that passes everything to
// Echo's response and keeps a copy of the body up to
// WithMaxStoredResponse.
//
// A handler that returns an error leaves the answer to Echo's
// HTTPErrorHandler, after the middleware; its key is released, so a retry
// runs the handler again, as it is for a response that is not stored (5xx
// by default; WithStorePolicy). A response over WithMaxStoredResponse,
// and a streamed one (the handler flushes or hijacks), is sent as it is
// and not stored: its key keeps a terminal record, and every repeat gets
// 500 response-not-stored, marked replayed, without running the handler
// again (WithUnstored(ReleaseKey, ...) releases the key instead).
//
// The middleware's own errors are RFC 9457 application/problem+json
// written directly (the Problem type and the type URIs of idemhttp,
// without its optional members), with Cache-Control: no-store. With
// WithHTTPErrors they are returned instead as *echo.HTTPError, for the
// application's error handler, wrapping a *ProblemError that holds the
// problem. Neither form quotes the key, token or principal.
//
//	400 key-missing, key-invalid, token-missing, token-invalid, body-unreadable
//	401 unauthenticated       the principal function failed or gave ""
//	409 in-progress           first request still running; Retry-After
//	409 duplicate             Window repeat; Retry-After is the window left
//	409 token-used            token spent without a stored outcome
//	413 body-too-large        request body over WithMaxBody
//	422 key-mismatch          key reused with another payload
//	500 response-not-stored   replay of a response too large or streamed to keep
//	500 internal              unexpected engine outcome
//	503 unavailable           store down, fail-closed; Retry-After
//
// With WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen)) a
// store failure runs the handler unguarded instead of answering 503.
//
// # Keys and scopes
//
// The principal (WithPrincipal, required) is the engine scope of every key
// and token, so one caller can never read another's stored response, and
// store keys hold only digests. The client's key is namespaced as
// keying.Key("echo", key), apart from the other adapters' keys.
package idemecho
