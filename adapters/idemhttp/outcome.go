package idemhttp

import (
	"fmt"
	"net/http"

	"github.com/idemkit/idemkit"
)

// windowKey is the context key under which Window hands the handler its
// status writer, for OutcomeUnknown.
type windowKey struct{}

// OutcomeUnknown tells the middleware, from inside its handler, that the
// work may have been done but its outcome could not be learned: a service
// the handler called timed out, or broke off its answer after it had
// begun. Releasing the key would let a retry do the work a second time,
// so the key is kept instead:
//
//   - Idempotency and Token: the key (or token) keeps a terminal record
//     whatever the response and the store policy; every retry gets 500
//     ProblemOutcomeUnknown, marked replayed, and the handler does not run
//     again. The client must learn the outcome another way, and use a new
//     key for a request that is meant to run again.
//   - Window: the claim is kept until the window ends, as for a success,
//     whatever the response (idemkit.ReleaseOnError does not release it).
//
// The response the handler writes is still sent to this request's client.
// In Idempotency and Token mode what the handler had written before the
// call (status and body, not yet sent) is discarded, so it can write the
// answer for this request; headers are left as they are for the handler
// to reset. discarded is false when part of the response has gone out
// already (a flushed, hijacked or oversized response, or in Window mode
// any written status): the handler cannot change it, and should cut it off
// with panic(http.ErrAbortHandler) so the client does not take a partial
// body for a whole one. That panic, after OutcomeUnknown, still leaves the
// key's record in place; it goes on once the record is stored.
//
// OutcomeUnknown returns an error wrapping idemkit.ErrInvalid when r did
// not come through Idempotency, Token or Window to the handler, or the
// handler completed its response with CompleteIn.
func OutcomeUnknown(r *http.Request) (discarded bool, err error) {
	ctx := r.Context()
	if rec, ok := ctx.Value(recorderKey{}).(*recorder); ok {
		if rec.txResponse != nil {
			return false, fmt.Errorf("idemhttp: %w: OutcomeUnknown after CompleteIn", idemkit.ErrInvalid)
		}
		rec.unknown = true
		if rec.state != capturing {
			return false, nil
		}
		rec.status, rec.header, rec.body = 0, nil, nil
		return true, nil
	}
	if sw, ok := ctx.Value(windowKey{}).(*statusWriter); ok {
		sw.unknown = true
		return sw.status == 0, nil
	}
	return false, fmt.Errorf("idemhttp: %w: OutcomeUnknown needs a request served through Idempotency, Token or Window", idemkit.ErrInvalid)
}
