// Package idemotel reports idemkit's outcomes as OpenTelemetry metrics and
// traces. It lives in a module of its own, so users of the core module
// never get the OpenTelemetry SDK in their module graph.
//
// # Metrics
//
//   - idemkit.outcomes (counter, {outcome}): one per engine event, with
//     idemkit.mode (guard, do, token) and idemkit.outcome (admitted,
//     replayed, duplicate, in_progress, mismatch, lease_lost, fail_open,
//     store_error, ...).
//   - idemkit.work.duration (histogram, s): how long admitted work ran, with
//     idemkit.mode and idemkit.outcome (completed or released).
//   - idemkit.claims.in_flight (up-down counter, {claim}): Do and UseToken
//     claims (those handed out by Begin and BeginBatch too) admitted and
//     not ended yet, by idemkit.mode. A claim is taken out by the event
//     that ends it, however it ends (completed, failed, released, lease
//     lost, store failure, panic): the engine gives exactly that event a
//     Duration (see idemkit.Event). The gauge returns to zero when the
//     engine is idle. Guard executions report no end and are not counted.
//   - idemkit.store.duration (histogram, s): each store operation through a
//     store wrapped with WrapStore, with idemkit.store.operation and, on
//     failure, error.type.
//   - idemkit.evictions, idemkit.breaker.transitions and
//     idemkit.copy_forward.conflicts (counters), fed by the Evicted,
//     BreakerChanged and CopyForwardConflict methods, which match the
//     callbacks of memstore and policy.
//
// Both histograms advise bucket boundaries for seconds, from 0.0005 (half a
// millisecond) to 10: OpenTelemetry's default boundaries suit milliseconds.
// A View in the MeterProvider can override them.
//
// Attributes carry only bounded, non-secret values: modes, outcomes,
// operation names, breaker states and error types; never a key, token,
// principal or fingerprint.
//
// # Traces
//
// The Observer is also an idemkit.Tracer: every Guard, Do, Begin,
// IssueToken and UseToken gets a span (idemkit.Do, ...) that is a child of
// the caller's span; the work fn runs inside it, each outcome is an event
// on it, and idemkit.outcome holds the last one, so a replay shows as
// idemkit.outcome=replayed. WrapStore adds a child span per store
// operation.
package idemotel
