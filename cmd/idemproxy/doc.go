// Command idemproxy is a reverse proxy that gives any HTTP backend
// idempotency keys, duplicate-submission windows and one-time tokens,
// configured per route, without linking a Go library: the idemhttp
// middlewares in front of net/http/httputil.ReverseProxy, over a store
// that several proxy instances share (Redis, PostgreSQL, MySQL).
//
// Usage:
//
//	idemproxy -config idemproxy.toml [-listen addr] [-upstream url] [-store url]
//
// Flags override the environment (IDEMPROXY_CONFIG, IDEMPROXY_LISTEN,
// IDEMPROXY_UPSTREAM, IDEMPROXY_STORE, or the shared IDEMKIT_STORE; and
// IDEMKIT_KEY_SECRET or IDEMKIT_KEY_SECRET_FILE, see "Key secret"), which
// overrides the file. Keep the store URL's password in the environment
// rather than in the file. An
// upstream URL with credentials (user:password@) is refused, with an
// error that does not repeat it: the proxy never sends credentials to the
// upstream.
//
// # Routes
//
// Each [[route]] of the configuration matches a method and a path pattern
// (http.ServeMux syntax, such as "POST /orders/{id}/pay") and names a mode:
//
//   - key: the client sends Idempotency-Key; the first response is stored
//     and replayed to retries with the same key (409 while it runs, 422
//     for another payload).
//   - window: a repeat of the same request (principal, route, canonical
//     body) inside the window gets 409 with Retry-After.
//   - token: the request must carry a one-time token issued by a route of
//     mode issue-token (answered by the proxy itself, never the upstream).
//   - pass: forwarded as it is.
//
// Requests no route matches are forwarded as they are.
//
// # Callbacks
//
// A key route can serve a webhook sender's callbacks (docs/callbacks.md):
// key_from reads the key from a body member ("json:out_trade_no"), a
// header ("header:X-GitHub-Delivery") or a query parameter
// ("query:event") instead of Idempotency-Key; include and volatile name
// the body members that must match or are ignored; callback = true
// answers every duplicate with the first 2xx response (retention, if set,
// keeps records that long; a week by default). A [route.signature] table
// (sender, secret_file, and optionally header, prefix, timestamp_header,
// tolerance) makes the route's principal the sender whose HMAC-SHA256
// signature of the body matches, instead of the principal source: a
// forged callback gets 401 and never reaches the store or the upstream.
//
// # Paths
//
// Routes match a normalised request path, so that every spelling the
// upstream's framework routes to a handler is guarded by that handler's
// route and shares its keys' records. A path holding an encoded slash,
// backslash or semicolon (%2F, %5C, %3B), an encoded NUL, a backslash or
// a dot segment ("." or "..", also encoded or with ;parameters, as in
// "..;") is read in different ways by different servers and gets 400
// (https://idemkit.dev/problems/proxy/ambiguous-path), whatever the route.
// Otherwise each segment loses its ;parameters (/orders;jsessionid=1 is
// /orders, as in Tomcat and Spring) and is percent-decoded, empty segments
// go (//orders and /orders/ are /orders, as in Express), and, unless
// case_sensitive_paths = true, the path and the route patterns are
// lower-cased (/ORDERS is /orders, as in Express); set it for an upstream
// that routes /Orders and /orders apart. A route's path must therefore
// not end in / or /{$}; a subtree is written /files/{path...}, which
// matches /files too. The upstream gets the path as the client sent it.
//
// # When the store fails
//
// A store that does not answer at start-up (within 2s) does not stop the
// proxy: it logs a warning with the store's error (a server down, a SQL
// table that does not exist: add create_table=true to the URL) and serves,
// reporting unready, until the store answers. The SQL stores are the
// exception: store.Open connects, so a PostgreSQL or MySQL server that
// does not answer stops the proxy at start-up. idemdemo follows the same
// rule. A mem:// store (the default) is logged at Warn at start: its
// records live in the process only. While the store does not answer, the
// health path answers 503 and each route says what happens:
// failure = "closed" (the default) answers 503 with Retry-After and
// forwards nothing; failure = "open" forwards the request unguarded (and
// logs it); fallback = true keeps the route guarded by an in-process
// memory tier once the store has failed a few times in a
// row (policy.Tiered's circuit breaker; until then, and for the breaker's
// probes of the store, the route answers as its failure mode says), and
// copies those records back when the store answers again. A memory tier
// guards one instance only: duplicates spread over several instances
// during an outage are not caught.
//
// # Responses
//
// A replay carries the upstream's stored status, body and allow-listed
// headers (Content-Type, Content-Encoding, Location, and each route's
// replay_headers); Set-Cookie is sent on the fresh response only, unless a
// route says set_cookie = "replay" or "strip". Hop-by-hop headers are never
// stored. Upstream 5xx and unreachable upstreams (502, the connection
// could not be opened) are not stored: a retry reaches the upstream again.
// Server-sent events
// (counted and logged) and responses over max_stored_response (logged)
// are sent as they come and not stored: by default the key keeps a
// terminal record, so a retry gets 500 response-not-stored instead of a
// second execution, or with unstored = "release" the retry reaches the
// upstream again. Request bodies are bounded in size (max_body: 413) and
// in time: a client gets read_header_timeout (default 10s) to send its
// headers, then body_timeout (default 30s, per route overridable) to send
// its body, so a request is read within their sum; a slower client is
// disconnected, or answered 408 (400 body-unreadable on a guarded route).
// The bound ends with the body: a slow upstream answer is not cut off.
//
// # When the upstream's outcome is unknown
//
// A guarded request's key is held (409 with Retry-After to duplicates)
// while the upstream works, also after the client has gone away: the
// upstream call is not cancelled with the client's request, but is bounded
// by upstream_timeout to the response headers, and by upstream_timeout more
// once the client has gone. When the proxy cannot learn whether the
// upstream ran, the key is not released, since a retry might run the work
// twice: after an upstream timeout (504), a connection lost after the
// request was sent (502), a request sent upstream and then cut off by
// shutdown (502), or a 2xx response the upstream broke off (502
// upstream-broken, or a cut-off response when part of it had been sent),
// the key keeps a terminal record and every retry gets 500
// https://idemkit.dev/problems/outcome-unknown, marked replayed (see
// idemhttp.OutcomeUnknown). Such a 502 or 504 says retryable false and has
// no Retry-After; the client must learn the outcome another way, and send
// a new key for a request that is meant to run again. In window mode the
// window is kept instead.
//
// The proxy sends a request upstream at most once. net/http's Transport
// would send some again by itself on a new connection when a kept-alive
// one fails, even after writing them: a GET, HEAD, OPTIONS or TRACE, and
// any request without a body that carries Idempotency-Key or
// X-Idempotency-Key, as the proxy forwards it. The proxy lets the
// Transport resend only a request of which nothing was written, or, off
// guarded routes, a GET, HEAD, OPTIONS or TRACE; any other such failure is
// a lost connection after the request was sent (502, outcome unknown on a
// guarded route). An upstream that closes idle kept-alive connections
// should keep them longer than the proxy does (90s), or an upstream
// closing one just as a request goes out gives such a 502.
//
// # Protocol upgrades
//
// Only a real WebSocket opening handshake (a GET without a body, with
// Connection: Upgrade, Upgrade: websocket, Sec-WebSocket-Version: 13 and a
// Sec-WebSocket-Key) on a guarded route skips the route's key, window or
// token, since a switched connection cannot be replayed: it still needs
// the route's principal (401 without one), and is counted
// (upgrades_unguarded on the health endpoint) and logged. Any other
// request is guarded whatever its Connection and Upgrade headers say, and
// its Upgrade header is not forwarded, so the upstream answers it as an
// ordinary request.
//
// # Principal
//
// Keys, windows and tokens belong to a principal: a header set by a
// trusted gateway, the subject (or another claim) of a verified JWT, or
// the subject of a verified mTLS client certificate. A guarded request
// without one gets 401.
//
// With a JWT and no issuer pinned (principal.jwt.issuer empty), the
// principal is the JSON array ["<iss>","<claim>"] of the token's issuer
// and claim, so the same sub from two issuers whose keys the proxy holds
// is two principals; with issuer set, iss must match and the principal is
// the claim alone. A JWT whose header names critical extensions (crit), or
// whose header or claims name a member twice, is refused.
//
// # Key secret
//
// By default the store's key names, the payload fingerprints stored with
// them and the key digests in logs are plain SHA-256 digests, from which
// anyone who can list the store or read the logs can recover a guessable
// idempotency key or principal by hashing guesses. With a key secret
// (idemkit.WithKeySecret) they are HMAC-SHA-256 under it instead. The
// secret is read as every program of the project reads it
// (setup.LoadKeySecret): the text of IDEMKIT_KEY_SECRET, or the file named
// by IDEMKIT_KEY_SECRET_FILE, or, when neither is set, the file named by
// key_secret_file (one trailing newline removed). It must have at least 32
// bytes (`openssl rand -base64 32`); a shorter one, both variables at
// once, or a file that cannot be read stop the proxy with a configuration
// error, which never holds the secret. Every instance that shares a store
// must use the same secret, and idemctl needs it to find the keys; keys
// written under another secret (or none) are not found, so changing it
// is like starting over with an empty store.
//
// # Operations
//
// The proxy serves idemkit's metrics in Prometheus format on metrics_path
// (default /metrics), and a span per engine call whose trace ID its log
// lines carry. A mem:// store (the primary, or the fallback tier) adds
// idemkit_evictions_total and idemkit_store_refusals_total: a full memory
// store never evicts a claim in progress, and refuses the new request with
// 503 instead (see store/memstore); mem://?scope_quota=N also caps each
// principal's entries.
//
// The proxy answers its own health check (health_path, default /healthz)
// without reaching the upstream. SIGHUP reloads the JWT key files (a
// rotated JWKS); a reload that fails keeps the current keys. On SIGINT or
// SIGTERM the proxy stops accepting connections and lets in-flight
// requests finish for shutdown_timeout; requests still running then are
// cut off (answered 502) and their keys settled at once, not left to their
// lease: a request not yet sent upstream is released, so a retry to
// another instance runs it; one already sent, which the upstream may be
// doing, keeps the outcome-unknown record as above, and a retry gets that
// problem replayed. Shutdown ends within shutdown_timeout and 5s more.
package main
