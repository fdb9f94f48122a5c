package delivery

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
)

// Without RefuseMismatch, a key reused with another payload is answered
// by the key's record, as any copy is, and reported.
func TestOneMismatchIsAnsweredByTheRecordAndReported(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{Codec: idemkit.FinalErrors(errDeclined), Backoff: Backoff{First: time.Second, Max: time.Second}})
	var n atomic.Int64
	ctx := context.Background()
	p.One(ctx, Request{Key: "done", Fingerprint: "a", Run: effect(&n, nil)})
	if v := p.One(ctx, Request{Key: "done", Fingerprint: "b", Run: effect(&n, nil)}); v.Action != Ack || !v.Replayed || !v.Mismatch {
		t.Fatalf("completed key, other payload: %+v, want a replayed ack reporting the mismatch", v)
	}
	if v := p.One(ctx, Request{Key: "done", Fingerprint: "a", Run: effect(&n, nil)}); v.Action != Ack || v.Mismatch {
		t.Fatalf("completed key, same payload: %+v, want an ack without mismatch", v)
	}
	p.One(ctx, Request{Key: "declined", Fingerprint: "a", Run: effect(&n, errDeclined)})
	if v := p.One(ctx, Request{Key: "declined", Fingerprint: "b", Run: effect(&n, nil)}); v.Action != Drop || !v.Replayed || !v.Mismatch {
		t.Fatalf("failed key, other payload: %+v, want a replayed drop reporting the mismatch", v)
	}
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan Verdict)
	go func() {
		done <- p.One(ctx, Request{Key: "running", Fingerprint: "a", Run: func(context.Context) ([]byte, error) {
			close(started)
			<-release
			return nil, nil
		}})
	}()
	<-started
	if v := p.One(ctx, Request{Key: "running", Fingerprint: "b", Run: effect(&n, nil)}); v.Action != Retry || v.Delay <= 0 || !v.Mismatch || !errors.Is(v.Err, idemkit.ErrMismatch) {
		t.Fatalf("running key, other payload: %+v, want a retry reporting the mismatch", v)
	}
	close(release)
	<-done
	if n.Load() != 2 {
		t.Fatalf("effect ran %d times, want 2 (done and declined once each)", n.Load())
	}
}

// A record written without a fingerprint (before fingerprints were taken)
// answers a copy that has one, without a mismatch reported.
func TestOneRecordWithoutFingerprintIsNoMismatch(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{})
	var n atomic.Int64
	ctx := context.Background()
	p.One(ctx, Request{Key: "m", Run: effect(&n, nil)})
	if v := p.One(ctx, Request{Key: "m", Fingerprint: "b", Run: effect(&n, nil)}); v.Action != Ack || !v.Replayed || v.Mismatch {
		t.Fatalf("copy of a record without fingerprint: %+v, want a replayed ack, no mismatch", v)
	}
}
