// Package idemfiber puts an idemkit.Engine in front of Fiber v3 handlers:
// Idempotency-Key middleware with the same HTTP contract as
// adapters/idemhttp, working on Fiber's fasthttp request and response
// directly (no net/http conversion).
//
// It is a nested module, so Fiber and fasthttp never enter the idemkit
// module's dependencies.
//
//	guard, err := idemfiber.New(engine, idemfiber.WithPrincipal(userID))
//	app.Post("/orders", guard, createOrder)
//
// Unlike Fiber's own middleware/idempotency, whose lock is per process,
// the key is claimed in the engine's store before the handler runs, so
// instances sharing one store (Redis, SQL) run the handler once per key.
//
// # Contract
//
// For guarded methods (POST and PATCH by default, see WithMethods):
//
//   - no Idempotency-Key: 400 (unless WithOptionalKey); a malformed or
//     repeated one: 400; the principal function fails: 401;
//   - first request: the handler runs; its response is sent and, when the
//     store policy accepts its status (2xx and 4xx except 408, 409, 425
//     and 429 by default), stored. A response that is not stored (5xx), or
//     a handler that returns an error, releases the key so a retry runs the
//     handler again; a response too large to keep (WithMaxStoredResponse)
//     leaves a terminal record: repeats get 500 response-not-stored;
//   - the key while the first request runs: 409 with Retry-After, or with
//     WithEngineOptions(idemkit.WithWait(0)) the first response once stored;
//   - the key with another payload (method, route, path, query, canonical
//     JSON body): 422;
//   - the key after a stored response: the stored status, allow-listed
//     headers (Content-Type, Content-Encoding, Location and
//     WithReplayHeaders) and body, with Idempotent-Replayed: true;
//   - store down: 503 with Retry-After (fail-closed), or with
//     WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen)) the
//     handler runs unguarded.
//
// The body is fingerprinted as Fiber read it (c.BodyRaw); its size is
// bounded by Fiber's own Config.BodyLimit, which answers 413 before any
// middleware runs, so there is no separate body cap here.
//
// Errors are RFC 9457 application/problem+json bodies with the type URIs
// idemhttp uses (DefaultProblemBase + "in-progress", ...), Cache-Control:
// no-store, and never quote the key or the principal.
//
// # Keys and scopes
//
// The principal (WithPrincipal, required) is passed to the engine as
// idemkit.WithScope, so keys of different callers never meet, and the
// client's key is namespaced as keying.Key("fiber", key). The namespace is
// deliberately not idemhttp's "http": the two adapters fingerprint the
// route differently (a ServeMux pattern against a Fiber route path) and
// store responses in their own formats, so a record of one would answer
// the other with 422. Instances of idemfiber sharing a store interoperate;
// a fleet mixing net/http and Fiber services keeps its keys apart.
//
// # Callbacks
//
// A webhook sender names its event itself: WithKeyFrom reads the key from
// a body member (KeyFromJSON), a header, a query parameter or a function,
// and Callback answers every duplicate with the first 2xx response, as in
// idemhttp. Scope a key from the body with SignedPrincipal, which checks
// an HMAC-SHA256 signature of the body: a forged callback gets 401 before
// the engine is called. See docs/callbacks.md.
//
// # Routes
//
// The route path (c.Route().Path) is part of the fingerprint. Register the
// middleware on the route (app.Post("/orders", guard, handler)), not with
// app.Use, where the route seen is the Use prefix and only the method and
// path name the operation.
package idemfiber
