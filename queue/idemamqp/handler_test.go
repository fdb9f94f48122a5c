package idemamqp_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemamqp"
)

func counting(n *atomic.Int64, err error) idemamqp.Func {
	return func(context.Context, *amqp.Delivery) ([]byte, error) {
		n.Add(1)
		return []byte("done"), err
	}
}

func TestHandleAcksAfterRecordAndReplaysRedelivery(t *testing.T) {
	var n atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", counting(&n, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, a1 := fakeDelivery("m-1")
	again, a2 := fakeDelivery("m-1")
	again.Redelivered = true
	if out := h.Handle(ctx, first); out.Action != idemamqp.Ack || !out.Ran || out.Err != nil || out.Redelivered {
		t.Fatalf("first delivery: %+v", out)
	}
	if out := h.Handle(ctx, again); out.Action != idemamqp.Ack || !out.Replayed || out.Ran || !out.Redelivered {
		t.Fatalf("redelivery: %+v, want a replayed ack", out)
	}
	if n.Load() != 1 || !slices.Equal(a1.got(), []string{"ack"}) || !slices.Equal(a2.got(), []string{"ack"}) {
		t.Fatalf("runs %d, sent %v %v", n.Load(), a1.got(), a2.got())
	}
}

func TestHandleRacingDeliveriesOneRunsOthersRequeueAfterRetryAfter(t *testing.T) {
	release := make(chan struct{})
	var runs atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", func(context.Context, *amqp.Delivery) ([]byte, error) {
		runs.Add(1)
		<-release
		return nil, nil
	}, idemamqp.WithEngineOptions(idemkit.WithRetryHint(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	ackers := make([]*fakeAcker, n)
	outs := make([]idemamqp.Outcome, n)
	var wg, losers sync.WaitGroup
	losers.Add(n - 1)
	for i := range n {
		var d amqp.Delivery
		d, ackers[i] = fakeDelivery("same")
		wg.Go(func() {
			outs[i] = h.Handle(context.Background(), d)
			if !outs[i].Ran {
				losers.Done()
			}
		})
	}
	losers.Wait()
	close(release)
	wg.Wait()
	var acked, requeued int
	for i, out := range outs {
		switch {
		case out.Action == idemamqp.Ack && out.Ran:
			acked++
		case out.Action == idemamqp.Requeue && errors.Is(out.Err, idemkit.ErrInProgress) &&
			out.Delay > 0 && out.Delay <= 20*time.Millisecond && slices.Equal(ackers[i].got(), []string{"requeue"}):
			requeued++
		default:
			t.Errorf("delivery %d: %+v (sent %v)", i, out, ackers[i].got())
		}
	}
	if acked != 1 || requeued != n-1 || runs.Load() != 1 {
		t.Fatalf("acked %d, requeued %d, runs %d; want 1, %d, 1", acked, requeued, runs.Load(), n-1)
	}
}

func TestHandleFinalErrorRejectsAndDuplicateRejectsWithoutRunning(t *testing.T) {
	var n atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", counting(&n, errDeclined),
		idemamqp.WithErrorCodec(idemkit.FinalErrors(errDeclined)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, _ := fakeDelivery("m")
	dup, a := fakeDelivery("m")
	if out := h.Handle(ctx, first); out.Action != idemamqp.Reject || !errors.Is(out.Err, errDeclined) {
		t.Fatalf("final failure: %+v", out)
	}
	if out := h.Handle(ctx, dup); out.Action != idemamqp.Reject || !out.Replayed || !errors.Is(out.Err, errDeclined) {
		t.Fatalf("duplicate of a final failure: %+v", out)
	}
	if n.Load() != 1 || !slices.Equal(a.got(), []string{"reject"}) {
		t.Fatalf("runs %d, duplicate got %v", n.Load(), a.got())
	}
}

func TestHandleFinalPredicateRejects(t *testing.T) {
	var n atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", counting(&n, errDeclined),
		idemamqp.WithFinal(func(err error) bool { return errors.Is(err, errDeclined) }))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := fakeDelivery("m")
	if out := h.Handle(context.Background(), d); out.Action != idemamqp.Reject {
		t.Fatalf("final failure: %+v, want reject", out)
	}
}

func TestHandleTransientFailureRequeuesAfterRetryDelay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", func(context.Context, *amqp.Delivery) ([]byte, error) {
		if n.Add(1) == 1 {
			cancel() // the hold ends with the context: the delivery is requeued at once
			return nil, errors.New("db timeout")
		}
		return nil, nil
	}, idemamqp.WithRetryDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	d, a := fakeDelivery("m")
	out := h.Handle(ctx, d)
	if out.Action != idemamqp.Requeue || out.Delay != time.Hour || !slices.Equal(a.got(), []string{"requeue"}) {
		t.Fatalf("transient failure: %+v, sent %v", out, a.got())
	}
	again, _ := fakeDelivery("m")
	if out := h.Handle(context.Background(), again); !out.Ran || out.Action != idemamqp.Ack {
		t.Fatalf("redelivery after a transient failure: %+v, want a run", out)
	}
}

func TestHandleMissingKeyAndMismatchReject(t *testing.T) {
	var n atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", counting(&n, nil),
		idemamqp.WithFingerprint(func(d *amqp.Delivery) (string, error) { return string(d.Body), nil }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nokey, _ := fakeDelivery("")
	if out := h.Handle(ctx, nokey); out.Action != idemamqp.Reject || !errors.Is(out.Err, idemkit.ErrInvalid) {
		t.Fatalf("no MessageId: %+v, want reject", out)
	}
	d, _ := fakeDelivery("m")
	h.Handle(ctx, d)
	other, _ := fakeDelivery("m")
	other.Body = []byte("another body")
	if out := h.Handle(ctx, other); out.Action != idemamqp.Reject || !errors.Is(out.Err, idemkit.ErrMismatch) {
		t.Fatalf("key reused with another payload: %+v, want reject", out)
	}
	if n.Load() != 1 {
		t.Fatalf("runs %d, want 1", n.Load())
	}
}

func TestHeaderKey(t *testing.T) {
	key := idemamqp.HeaderKey("Order-Id")
	for _, c := range []struct {
		v    any
		want string
		ok   bool
	}{{"o-1", "o-1", true}, {[]byte("o-2"), "o-2", true}, {nil, "", false}, {"", "", false}, {int32(7), "", false}} {
		d := amqp.Delivery{Headers: amqp.Table{"Order-Id": c.v}}
		got, err := key(&d)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("header %#v: %q, %v; want %q, ok %v", c.v, got, err, c.want, c.ok)
		}
	}
}

func TestNewHandlerRejectsBadArguments(t *testing.T) {
	e := testkit.NewEngine(t)
	fn := func(context.Context, *amqp.Delivery) ([]byte, error) { return nil, nil }
	for name, build := range map[string]func() (*idemamqp.Handler, error){
		"nil engine": func() (*idemamqp.Handler, error) { return idemamqp.NewHandler(nil, "n", fn) },
		"nil fn":     func() (*idemamqp.Handler, error) { return idemamqp.NewHandler(e, "n", nil) },
		"bad name":   func() (*idemamqp.Handler, error) { return idemamqp.NewHandler(e, "a b", fn) },
		"nil key":    func() (*idemamqp.Handler, error) { return idemamqp.NewHandler(e, "n", fn, idemamqp.WithKey(nil)) },
		"nil codec": func() (*idemamqp.Handler, error) {
			return idemamqp.NewHandler(e, "n", fn, idemamqp.WithErrorCodec(nil))
		},
		"neg delay":  func() (*idemamqp.Handler, error) { return idemamqp.NewHandler(e, "n", fn, idemamqp.WithRetryDelay(-1)) },
		"nil option": func() (*idemamqp.Handler, error) { return idemamqp.NewHandler(e, "n", fn, nil) },
		"bad lease": func() (*idemamqp.Handler, error) {
			return idemamqp.NewHandler(e, "n", fn, idemamqp.WithEngineOptions(idemkit.WithLease(0)))
		},
		"nil logger": func() (*idemamqp.Handler, error) { return idemamqp.NewHandler(e, "n", fn, idemamqp.WithLogger(nil)) },
		"nil final":  func() (*idemamqp.Handler, error) { return idemamqp.NewHandler(e, "n", fn, idemamqp.WithFinal(nil)) },
		"nil fingerp": func() (*idemamqp.Handler, error) {
			return idemamqp.NewHandler(e, "n", fn, idemamqp.WithFingerprint(nil))
		},
		"cap under first": func() (*idemamqp.Handler, error) {
			return idemamqp.NewHandler(e, "n", fn, idemamqp.WithBackoff(time.Second, time.Millisecond))
		},
		"zero attempts": func() (*idemamqp.Handler, error) {
			return idemamqp.NewHandler(e, "n", fn, idemamqp.WithMaxAttempts(0))
		},
		"nil report": func() (*idemamqp.Handler, error) { return idemamqp.NewHandler(e, "n", fn, idemamqp.WithReport(nil)) },
	} {
		if h, err := build(); h != nil || !errors.Is(err, idemkit.ErrInvalid) {
			t.Errorf("%s: %v, %v; want ErrInvalid", name, h, err)
		}
	}
}

func TestHandleBatch(t *testing.T) {
	var n atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", counting(&n, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old, _ := fakeDelivery("old")
	h.Handle(ctx, old)
	var ds []amqp.Delivery
	var ackers []*fakeAcker
	for _, id := range []string{"a", "old", "a", "", "b"} {
		d, a := fakeDelivery(id)
		ds, ackers = append(ds, d), append(ackers, a)
	}
	outs := h.HandleBatch(ctx, ds)
	want := []idemamqp.Action{idemamqp.Ack, idemamqp.Ack, idemamqp.Ack, idemamqp.Reject, idemamqp.Ack}
	for i, out := range outs {
		if out.Action != want[i] || len(ackers[i].got()) != 1 {
			t.Errorf("delivery %d: %+v sent %v, want %v once", i, out, ackers[i].got(), want[i])
		}
	}
	if !outs[1].Replayed || !outs[2].Replayed || n.Load() != 3 {
		t.Fatalf("replays %+v %+v, runs %d (want 3: old, a, b)", outs[1], outs[2], n.Load())
	}
}

func TestServeBatchesRejectsBadSize(t *testing.T) {
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", counting(new(atomic.Int64), nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.ServeBatches(context.Background(), nil, 0); !errors.Is(err, idemkit.ErrInvalid) {
		t.Fatalf("batch size 0: %v, want ErrInvalid", err)
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[idemamqp.Action]string{idemamqp.Ack: "ack", idemamqp.Requeue: "requeue", idemamqp.Reject: "reject", -1: "Action(-1)"} {
		if got := a.String(); got != want {
			t.Errorf("%d: %q, want %q", int(a), got, want)
		}
	}
}

// TestServeAfterCtxEndsHandlesNothing: once ctx has ended, Serve and
// ServeBatches return ctx.Err() without handling a delivery that is
// waiting (it is left to the broker, requeued when its channel closes):
// no effect starts after shutdown began.
func TestServeAfterCtxEndsHandlesNothing(t *testing.T) {
	var n atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", counting(&n, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 40 { // select picks at random among ready cases
		d, a := fakeDelivery(fmt.Sprint("m-", i))
		ds := make(chan amqp.Delivery, 1)
		ds <- d
		var err error
		if i%2 == 0 {
			err = h.Serve(ctx, ds)
		} else {
			err = h.ServeBatches(ctx, ds, 4)
		}
		if !errors.Is(err, context.Canceled) || len(a.got()) != 0 {
			t.Fatalf("round %d: err %v, sent %v; want context.Canceled and nothing sent", i, err, a.got())
		}
	}
	if n.Load() != 0 {
		t.Fatalf("effect ran %d times after ctx ended", n.Load())
	}
}
