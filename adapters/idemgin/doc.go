// Package idemgin puts an idemkit.Engine in front of gin handlers, with
// the same modes, HTTP contract and problem documents as adapters/idemhttp,
// working with gin's context, writer and render directly.
//
// It is a nested module, so gin never enters the idemkit module's
// dependencies.
//
//	guard, err := idemgin.Idempotency(engine, idemgin.WithPrincipal(idemgin.ContextPrincipal("user")))
//	r.POST("/orders", auth, guard, createOrder)
//
// # Modes
//
//   - Idempotency: the client sends an Idempotency-Key. The first request
//     runs the rest of the chain and its response is stored; a retry with
//     the key gets the stored status, allow-listed headers (Content-Type,
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
//     into a page) bound to the principal is spent before the chain runs;
//     a reuse gets the first outcome, or 409 token-used.
//
// Only guarded methods (POST and PATCH by default, WithMethods) are
// checked; other requests go on untouched. The key is claimed in the
// engine's store before the chain runs, so instances sharing one store
// (Redis, SQL) run the handler once per key.
//
// # gin's context
//
// Register the middleware on the route, after the middleware that
// authenticates (its principal is read with c.Get through ContextPrincipal,
// or by any PrincipalFunc), so that c.FullPath(), part of every
// fingerprint, names the route. When the middleware answers itself (a
// problem, or a replay) it calls c.Abort: no later handler runs. The rest
// of the chain writes through a writer that passes everything to gin's and
// keeps a copy of the body up to WithMaxStoredResponse, so gin's render
// (c.JSON, c.Data, c.String, ...), c.Status and c.Header work as always.
//
// A response that is not stored (5xx by default; WithStorePolicy) is sent
// and releases the key, so a retry runs the handler again; so does a
// panic. A response over WithMaxStoredResponse, and a streamed one (c.Stream,
// c.SSEvent with a flush, or anything that calls Flush or Hijack), is sent
// as it is and not stored: its key keeps a terminal record, and every
// repeat gets 500 response-not-stored, marked replayed, without running the
// handler again (WithUnstored(ReleaseKey, ...) releases the key instead).
//
// # Keys and scopes
//
// The principal (WithPrincipal, required) is the engine scope of every key
// and token, so one caller can never read another's stored response, and
// store keys hold only digests. The client's key is namespaced as
// keying.Key("gin", key): idemhttp's "http", idemfiber's "fiber" and
// idemecho's "echo" keys never meet these, as each fingerprints the route
// in its own router's terms.
//
// # Problems
//
// The middleware answers its own errors with RFC 9457
// application/problem+json (the Problem type and the type URIs of
// idemhttp, without its optional members), Cache-Control: no-store, and
// never quotes the key, token or principal:
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
// store failure runs the chain unguarded instead of answering 503.
package idemgin
