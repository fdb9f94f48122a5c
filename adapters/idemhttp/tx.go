package idemhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

// recorderKey is the context key under which Idempotency hands the handler
// its recorder, for CompleteIn.
type recorderKey struct{}

// CompleteIn records the response the handler answers with through tx, a
// view of the engine's store bound to the handler's database transaction
// (such as sqlstore's Tx), so the stored response commits or rolls back
// with the handler's business write. Call it inside the transaction of a
// handler behind Idempotency. When it returns nil, commit and write no
// response: the middleware sends the recorded one. When it returns an
// error, or the commit fails, roll back and write the response to send:
// the middleware sends it and frees the key. An error wrapping
// idemkit.ErrLeaseLost means another request owns the key now;
// idemkit.ErrInvalid, that the request did not come through Idempotency or
// the status is invalid or not stored by the route's policy
// (WithStorePolicy); idemkit.ErrResultTooLarge, that the response is over
// the route's stored-size cap. See the package documentation, section
// "Database transactions".
func CompleteIn(r *http.Request, tx store.Store, status int, header http.Header, body []byte) error {
	ctx := r.Context()
	rec, _ := ctx.Value(recorderKey{}).(*recorder)
	claim := idemkit.ClaimFromContext(ctx)
	if rec == nil || claim == nil {
		return fmt.Errorf("idemhttp: %w: CompleteIn needs a request served through Idempotency", idemkit.ErrInvalid)
	}
	if status < 100 || status > 999 {
		return fmt.Errorf("idemhttp: %w: invalid status %d", idemkit.ErrInvalid, status)
	}
	if !rec.c.store(status) {
		return fmt.Errorf("idemhttp: %w: status %d is not stored by this route's policy", idemkit.ErrInvalid, status)
	}
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	body = settleBody(status, h, body)
	enc := encodeResponse(status, h, rec.c.replayHeaders, body)
	if len(enc) > rec.c.maxStored {
		return fmt.Errorf("idemhttp: %w: %d bytes encoded, cap %d", idemkit.ErrResultTooLarge, len(enc), rec.c.maxStored)
	}
	if err := claim.CompleteIn(ctx, tx, enc); err != nil {
		return err
	}
	rec.txResponse = enc
	return nil
}

// withRecorder returns r with a context that carries rec and the engine's
// claim (ctx, the context Do gives the work), for CompleteIn.
func withRecorder(r *http.Request, ctx context.Context, rec *recorder) *http.Request {
	return r.WithContext(context.WithValue(ctx, recorderKey{}, rec))
}

// afterTx answers a request whose handler completed its response with
// CompleteIn. The engine returns the recorded response when the
// transaction committed; otherwise the key was freed and the handler's own
// response is sent. When the store could not tell, the recorded response
// is sent if the handler wrote nothing after CompleteIn (it meant to
// commit), its own response otherwise.
func (rt *route) afterTx(w http.ResponseWriter, r *http.Request, rec *recorder, res idemkit.Result, err error, key string) {
	sent := res.Value
	if sent == nil && errors.Is(err, idemkit.ErrUnavailable) {
		rt.warn(r.Context(), "idemhttp: could not tell whether the handler's transaction committed", r,
			slog.String("error", describe(err)))
		if rec.status == 0 && len(rec.body) == 0 {
			sent = rec.txResponse
		}
	}
	if sent == nil {
		rt.afterRun(r, rec, nil)
		if rec.state == capturing {
			rec.writeFresh(r.Method)
		}
		return
	}
	if rec.state != capturing {
		return // the handler streamed or hijacked after CompleteIn: its response went out
	}
	rec.restoreHeader()
	if derr := sendResponse(w, sent, r.Method, rt.c.replayHeader, false); derr != nil {
		rt.internal(w, r, derr, key)
	}
}
