// Package netcore is what the idemkit adapters for net/http-based
// frameworks (gin, Echo) share, on top of httpcore: the configuration and
// its option checks, the three modes (idempotency keys, dedup windows and
// one-time tokens) run against the engine, the response capture, and the
// problem and replay answers written to an http.ResponseWriter.
//
// A framework adapter supplies an Exchange: the request, the writer to
// answer on, the route pattern, and a way to run the rest of its chain
// with a capturing writer. It decides the principal itself and turns an
// Answer into its framework's form (a written problem and an abort in gin,
// a problem or an *echo.HTTPError in Echo).
package netcore
