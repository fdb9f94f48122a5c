// Package idemhttp puts an idemkit.Engine in front of net/http handlers and
// gives clients a retrying http.RoundTripper. It uses the standard library
// only and works with http.ServeMux and any router that accepts
// func(http.Handler) http.Handler.
//
//	guard, err := idemhttp.Idempotency(engine, idemhttp.WithPrincipal(userID))
//	mux.Handle("POST /orders", guard(createOrder))
//
// # Modes
//
// Each route picks the mode it needs; configuration is plain Go, per
// route, checked once by the constructor, with no global state:
//
//   - Idempotency: the client sends an Idempotency-Key
//     (draft-ietf-httpapi-idempotency-key-header). The first request runs
//     the handler and its response is stored; a retry with the key gets the
//     stored response with Idempotent-Replayed: true; a concurrent retry
//     gets 409 (or, WithWait, the response once stored), a retry with
//     another payload 422.
//   - Window: no client key. A repeat of the same request (principal,
//     method, route, path, selected query parameters, canonical body)
//     inside a short window gets 409 with Retry-After.
//   - Token: TokenIssuer hands out one-time tokens bound to the principal;
//     Token requires one on each request, in a header or a form field
//     (WithTokenField), and spends it before the handler runs. A reused
//     token gets the first outcome or 409.
//
// Only guarded methods (POST and PATCH by default, WithMethods) are
// checked; other requests pass straight to the handler.
//
// Each option's doc names the constructors it applies to. A constructor
// refuses an option of another mode ("WithKeyHeader applies to Idempotency
// only, not Window"), a nil option, a nil function or logger, an
// out-of-range value and a contradictory pair (WithVolatile with
// WithFingerprinter), with an error wrapping idemkit.ErrInvalid: nothing
// is clamped or ignored, so give each route its own option list.
//
// # Principals and keys
//
// Every mode needs WithPrincipal. The principal is the engine scope
// (idemkit.WithScope) of every key and token, so one principal can never
// read another's stored response, even with the same key, and store keys
// hold only digests of principals, keys and tokens. TrustedHeaderPrincipal
// reads the principal from a header, which is only safe behind a gateway
// that sets it and strips what clients send.
//
// Every key this package gives the engine starts with "http" (keying.Key),
// so no other adapter's keys can meet them. Tokens need no such prefix:
// the engine makes them, at random, and binds them to the principal, so a
// token the application issues itself (engine.IssueToken, rendered into a
// form) works with Token. An idempotency key or token is read as an RFC
// 8941 sf-string or a bare token of 1 to MaxKeyLen printable ASCII
// characters.
//
// # Callbacks
//
// A webhook sender names its event itself, in the body, a header or the
// query: WithKeyFrom reads the key from there (KeyFromJSON, KeyFromHeader,
// KeyFromQuery, KeyFromFunc), and Callback makes the route answer every
// duplicate with the first 2xx response. A key read from the body is the
// sender's word, so scope it with a principal that authenticates the
// sender: SignedPrincipal checks an HMAC-SHA256 signature header. See
// docs/callbacks.md.
//
// # ServeMux and r.Pattern
//
// The route pattern (r.Pattern) is part of every fingerprint. ServeMux
// sets it only after routing, so wrap the handler you register on the mux,
// as above, rather than the mux itself; around the mux the pattern is
// empty and only the method and path name the operation.
//
// # Fingerprints
//
// Request bodies are read for the fingerprint up to WithMaxBody (1 MiB by
// default; larger ones get 413) and restored for the handler; the body
// the server gave, read to its end, is closed (so the server does not look
// for more of it after the response: a middleware outside this one that
// reads it afterwards gets http's error for a closed body, not io.EOF).
// JSON bodies are fingerprinted in canonical form (package keying), so
// member order, whitespace and number spelling do not matter.
// Idempotency mode compares the whole payload: a retry that differs in any
// member is another request (422). Window mode drops the top-level keying.WindowVolatile
// members (traceId, timestamp and the like), which change between two
// clicks of one form. WithVolatile names more members to drop, by JSON
// path; WithFingerprinter replaces the fingerprinter; WithQueryParams
// selects the query parameters that count (Idempotency: all by default;
// Window: none).
//
// WithPayloadWindow adds, in Idempotency mode, a guard for clients that
// mint a new key per click: the same payload under another key within the
// window gets 409 ProblemPayloadReused.
//
// # Stored responses
//
// A handler's response is captured (status, headers, body) before it is
// sent. Which statuses are stored is a policy: DefaultStorePolicy stores
// 2xx and 4xx except 408, 409, 425 and 429; StoreAll stores everything.
// A response that is not stored (5xx by default) is still sent to the
// client, and the key is released so a retry runs the handler again. A
// replay carries the stored status, body and the allow-listed headers
// (Content-Type, Content-Encoding, Location and WithReplayHeaders), byte
// for byte, with the replay header (WithReplayHeader).
//
// A first response and its replays declare their length alike. A body
// of up to 2048 bytes is written whole before the middleware returns, so
// net/http's server (HTTP/1 and HTTP/2) adds its Content-Length itself:
// the middleware leaves the header out of the map, and removes one a
// handler set. A larger body, an empty answer to HEAD, or a response
// whose header map holds Transfer-Encoding or Trailer gets Content-Length
// in the header map. A ResponseWriter that is not
// net/http's server (httptest.ResponseRecorder, say) therefore sees no
// Content-Length for a small body; a middleware outside this one that
// flushes the response before its handler returns makes HTTP/1 send a
// small body chunked.
//
// A response that cannot be stored, because it is over
// WithMaxStoredResponse or streamed (the handler calls Flush or Hijack,
// directly or through http.ResponseController), is passed through to the
// client as written. Its key then keeps a terminal record (a tombstone,
// as other idempotency middlewares keep): a retry gets 500 ProblemResponseNotStored, marked
// replayed, not retryable, and the handler never runs twice. 500 because
// the server, not the client, failed to keep the outcome, and not 409,
// which the draft gives to a request in progress and clients retry.
// WithUnstored(ReleaseKey, ReleaseKey) releases the key instead, so a
// retry runs the handler again.
//
// A handler whose work may have run but whose outcome it could not learn
// (a service it called timed out, or broke off its answer) calls
// OutcomeUnknown: the key keeps a terminal record whatever the response,
// and a retry gets 500 ProblemOutcomeUnknown, marked replayed, instead of
// running the work a second time (Window mode keeps its claim for the
// window). The sidecar cmd/idemproxy does so for upstream timeouts and
// broken responses.
//
// # Database transactions
//
// A handler behind Idempotency can record its response in its own
// database transaction with CompleteIn and a store view bound to the
// transaction (sqlstore's Tx): the response commits or rolls back with the
// business write, so a crash between them cannot make a retry run the
// handler again. After a commit the handler writes nothing and the
// middleware sends the recorded response; after a rollback it sends what
// the handler wrote and frees the key.
//
// CompleteIn is called inside the transaction; when it returns nil, the
// handler commits and writes no response: once the handler returns, the
// middleware answers with exactly the response every retry of the key
// will get. When it returns an error, or the commit fails, the handler
// rolls back and writes the response it wants sent (an error, say): the
// middleware sends it and frees the key, so a retry runs the handler
// again. Only the headers on the replay allow-list (WithReplayHeaders) are
// recorded and sent; as net/http would, a body without a Content-Type
// gets a sniffed one, and a status that allows no body sends none.
//
// # Problem details
//
// The middleware answers its own errors with application/problem+json
// (RFC 9457) and Cache-Control: no-store. Each type URI is the base
// (DefaultProblemBase, or WithProblemBase) followed by a name that
// ProblemTypes documents with its status, title and description, so a
// server can publish a page per type; the Problem* constants are the
// default URIs. Three optional members, all on by default
// (WithProblemMembers), follow what clients of the IETF draft expect:
//
//   - instance: a fresh urn:uuid per response (WithProblemInstance);
//   - retryable: true exactly when the response carries Retry-After;
//   - idempotency_key: in Idempotency mode, the client's own key, back to
//     the same client. A token or principal is never echoed.
//
// Status codes:
//
//	400 key-missing, key-invalid, token-missing, token-invalid, body-unreadable
//	401 unauthenticated       the principal function failed
//	409 in-progress           first request still running; Retry-After
//	409 duplicate             Window repeat; Retry-After is the window left
//	409 payload-reused        same payload under a new key (WithPayloadWindow)
//	409 token-used            token spent without a stored outcome
//	413 body-too-large        request body over WithMaxBody
//	422 key-mismatch          key reused with another payload
//	500 response-not-stored   replay of a response too large or streamed to keep
//	500 outcome-unknown       replay of a request whose outcome the handler could not learn
//	500 internal              unexpected engine outcome
//	503 unavailable           store down, fail-closed; Retry-After
//
// Retry-After is in whole seconds, rounded up, at least 1.
//
// # Failure policy
//
// When the store fails a route answers 503 (fail-closed, the default) or,
// with WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen)), runs
// the handler unguarded. The choice is per route. TokenIssuer needs the
// store whatever the policy.
//
// # Logs and secrets
//
// Log lines (WithLogger) name the kind of an error, never its text: store
// errors name store keys, and with them keys, tokens and principals. An
// internal error's log line carries the problem's instance, so an answer
// can be matched to its line. Client-visible details never hold a token or
// principal.
//
// # Client
//
// Transport adds an Idempotency-Key to POST and PATCH requests and retries
// them with the same key after network errors, 503 and in-progress 409s,
// with bounded exponential backoff and jitter. Its zero fields take their
// defaults; an invalid one (Transport.Validate) fails RoundTrip before
// anything is sent.
package idemhttp
