package idemamqp_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemamqp"
)

// A message republished under the same key with another body is acked
// (without WithFingerprint nothing refuses it) but not silently: the
// engine's observer gets a mismatch event.
func TestRepublicationWithAnotherBodyIsReported(t *testing.T) {
	var mismatches atomic.Int64
	e := testkit.NewEngine(t, idemkit.WithObserver(idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		if ev.Kind == idemkit.EventMismatch {
			mismatches.Add(1)
		}
	})))
	var n atomic.Int64
	h, err := idemamqp.NewHandler(e, "billing", counting(&n, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, _ := fakeDelivery("m")
	h.Handle(ctx, first)
	copied, _ := fakeDelivery("m")
	same := h.Handle(ctx, copied)
	other, _ := fakeDelivery("m")
	other.Body = []byte("another body")
	out := h.Handle(ctx, other)
	if out.Action != idemamqp.Ack || !out.Replayed || !out.Mismatch || same.Action != idemamqp.Ack || same.Mismatch {
		t.Fatalf("republication with another body: %+v, want a replayed ack", out)
	}
	if got := mismatches.Load(); got != 1 {
		t.Fatalf("%d mismatch events, want 1 (the copy with the same body is no mismatch)", got)
	}
	if n.Load() != 1 {
		t.Fatalf("runs %d, want 1", n.Load())
	}
}
