// Package idemhttp puts an idemkit.Engine in front of net/http handlers and
// gives clients a retrying http.RoundTripper. It uses the standard library
// only and works with http.ServeMux and any router that accepts
// func(http.Handler) http.Handler.
//
// # Modes
//
// Each route picks the mode it needs; configuration is plain Go, per
// route, with no global state:
//
//   - Idempotency: the client sends an Idempotency-Key
//     (draft-ietf-httpapi-idempotency-key-header). The first request runs
//     the handler and its response is stored; a retry with the key gets the
//     stored response with Idempotent-Replayed: true; a concurrent retry
//     gets 409, a retry with another payload 422.
//   - Window: no client key. A repeat of the same request (principal,
//     method, route, path, selected query parameters, canonical body)
//     inside a short window gets 409 with Retry-After.
//   - Token: TokenIssuer hands out one-time tokens bound to the principal;
//     Token requires one on each request and spends it before the handler
//     runs. A reused token gets the first outcome or 409.
//
// Every mode needs WithPrincipal: keys, fingerprints and tokens are scoped
// by the caller, so one principal can never read another's stored
// response, even with the same key. TrustedHeaderPrincipal reads the
// principal from a header, which is only safe behind a gateway that sets
// it and strips what clients send.
//
//	guard, err := idemhttp.Idempotency(engine, idemhttp.WithPrincipal(userID))
//	mux.Handle("POST /orders", guard(createOrder))
//
// # ServeMux and r.Pattern
//
// The route pattern (r.Pattern) is part of every fingerprint. ServeMux
// sets it only after routing, so wrap the handler you register on the mux,
// as above, rather than the mux itself; around the mux the pattern is
// empty and only the method and path name the operation.
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
// for byte.
//
// Streaming responses are not guarded: when the handler calls Flush or
// Hijack (directly or through http.ResponseController), the response is
// passed through as written and the key is released. So is a response
// body over WithMaxStoredResponse, with a warning logged.
//
// Request bodies are read for the fingerprint up to WithMaxBody (1 MiB by
// default; larger ones get 413) and restored for the handler. JSON bodies
// are fingerprinted in canonical form (see package keying): whole in
// Idempotency and Token mode, without the top-level keying.WindowVolatile
// members in Window mode, and in both without the WithVolatile paths.
//
// # Errors
//
// The middleware answers its own errors with application/problem+json
// (RFC 9457), Cache-Control: no-store, and a stable type URI under
// ProblemBase, such as https://idemkit.dev/problems/in-progress; see the
// Problem* constants. 409 and 503 carry Retry-After in whole seconds,
// rounded up, at least 1, except the 409 for a spent token
// (ProblemTokenUsed), which no retry can fix. When the store fails the route answers 503
// (fail-closed, the default) or, with
// WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen)), runs the
// handler unguarded.
//
// # Client
//
// Transport adds an Idempotency-Key to POST and PATCH requests and retries
// them with the same key after network errors, 503 and in-progress 409s,
// with bounded exponential backoff and jitter.
package idemhttp
