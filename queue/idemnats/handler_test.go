package idemnats_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemnats"
)

func counting(n *atomic.Int64, err error) idemnats.Func {
	return func(context.Context, jetstream.Msg) ([]byte, error) {
		n.Add(1)
		return []byte("done"), err
	}
}

func TestHandleAcksAfterRecordAndReplaysRedelivery(t *testing.T) {
	var n atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", counting(&n, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, again := newFakeMsg("m-1"), newFakeMsg("m-1")
	if out := h.HandleContext(ctx, first); out.Action != idemnats.Ack || !out.Ran || out.Err != nil {
		t.Fatalf("first delivery: %+v", out)
	}
	if out := h.HandleContext(ctx, again); out.Action != idemnats.Ack || !out.Replayed || out.Ran {
		t.Fatalf("redelivery: %+v, want a replayed ack", out)
	}
	if n.Load() != 1 || !slices.Equal(first.sent(), []string{"ack"}) || !slices.Equal(again.sent(), []string{"ack"}) {
		t.Fatalf("runs %d, acks %v %v", n.Load(), first.sent(), again.sent())
	}
}

func TestHandleRacingDeliveriesOneRunsOthersNakWithRetryAfter(t *testing.T) {
	release := make(chan struct{})
	var runs atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", func(context.Context, jetstream.Msg) ([]byte, error) {
		runs.Add(1)
		<-release
		return nil, nil
	}, idemnats.WithEngineOptions(idemkit.WithRetryHint(250*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	msgs := make([]*fakeMsg, n)
	outs := make([]idemnats.Outcome, n)
	var wg, losers sync.WaitGroup
	losers.Add(n - 1)
	for i := range n {
		msgs[i] = newFakeMsg("same")
		wg.Go(func() {
			outs[i] = h.HandleContext(context.Background(), msgs[i])
			if !outs[i].Ran {
				losers.Done()
			}
		})
	}
	losers.Wait()
	close(release)
	wg.Wait()
	var acked, nakked int
	for i, out := range outs {
		switch {
		case out.Action == idemnats.Ack && out.Ran:
			acked++
		case out.Action == idemnats.Nak && errors.Is(out.Err, idemkit.ErrInProgress) &&
			out.Delay > 0 && out.Delay <= 250*time.Millisecond && msgs[i].delay == out.Delay:
			nakked++
		default:
			t.Errorf("delivery %d: %+v (sent %v)", i, out, msgs[i].sent())
		}
	}
	if acked != 1 || nakked != n-1 || runs.Load() != 1 {
		t.Fatalf("acked %d, nakked %d, runs %d; want 1, %d, 1", acked, nakked, runs.Load(), n-1)
	}
}

func TestHandleFinalErrorTermsAndDuplicateTermsWithoutRunning(t *testing.T) {
	var n atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", counting(&n, errDeclined),
		idemnats.WithErrorCodec(idemkit.FinalErrors(errDeclined)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, dup := newFakeMsg("m"), newFakeMsg("m")
	if out := h.HandleContext(ctx, first); out.Action != idemnats.Term || !errors.Is(out.Err, errDeclined) {
		t.Fatalf("final failure: %+v", out)
	}
	if out := h.HandleContext(ctx, dup); out.Action != idemnats.Term || !out.Replayed || !errors.Is(out.Err, errDeclined) {
		t.Fatalf("duplicate of a final failure: %+v", out)
	}
	if n.Load() != 1 || !slices.Equal(dup.sent(), []string{"term"}) {
		t.Fatalf("runs %d, duplicate got %v", n.Load(), dup.sent())
	}
}

func TestHandleFinalPredicateTerms(t *testing.T) {
	var n atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", counting(&n, errDeclined),
		idemnats.WithFinal(func(err error) bool { return errors.Is(err, errDeclined) }))
	if err != nil {
		t.Fatal(err)
	}
	if out := h.HandleContext(context.Background(), newFakeMsg("m")); out.Action != idemnats.Term {
		t.Fatalf("final failure: %+v, want term", out)
	}
}

func TestHandleTransientFailureNaksWithRetryDelay(t *testing.T) {
	var n atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", counting(&n, errors.New("db timeout")),
		idemnats.WithRetryDelay(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := newFakeMsg("m")
	out := h.HandleContext(context.Background(), m)
	if out.Action != idemnats.Nak || out.Delay != 5*time.Second || m.delay != 5*time.Second {
		t.Fatalf("transient failure: %+v, sent %v after %v", out, m.sent(), m.delay)
	}
	if out := h.HandleContext(context.Background(), newFakeMsg("m")); !out.Ran {
		t.Fatalf("redelivery after a transient failure: %+v, want a run", out)
	}
}

func TestHandleMissingKeyAndMismatchTerm(t *testing.T) {
	var n atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", counting(&n, nil),
		idemnats.WithFingerprint(func(m jetstream.Msg) (string, error) { return string(m.Data()), nil }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if out := h.HandleContext(ctx, newFakeMsg("")); out.Action != idemnats.Term || !errors.Is(out.Err, idemkit.ErrInvalid) {
		t.Fatalf("no Nats-Msg-Id: %+v, want term", out)
	}
	h.HandleContext(ctx, newFakeMsg("m"))
	other := newFakeMsg("m")
	other.data = []byte("another body")
	if out := h.HandleContext(ctx, other); out.Action != idemnats.Term || !errors.Is(out.Err, idemkit.ErrMismatch) {
		t.Fatalf("key reused with another payload: %+v, want term", out)
	}
	if n.Load() != 1 {
		t.Fatalf("runs %d, want 1", n.Load())
	}
}

func TestHandleBusinessKey(t *testing.T) {
	var n atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", counting(&n, nil), idemnats.WithKey(idemnats.HeaderKey("Order-Id")))
	if err != nil {
		t.Fatal(err)
	}
	a, b := newFakeMsg("id-1"), newFakeMsg("id-2") // distinct Nats-Msg-Id, same order
	a.hdr.Set("Order-Id", "o-7")
	b.hdr.Set("Order-Id", "o-7")
	h.HandleContext(context.Background(), a)
	if out := h.HandleContext(context.Background(), b); !out.Replayed || n.Load() != 1 {
		t.Fatalf("second publication of order o-7: %+v, runs %d", out, n.Load())
	}
}

func TestNewHandlerRejectsBadArguments(t *testing.T) {
	e := testkit.NewEngine(t)
	fn := func(context.Context, jetstream.Msg) ([]byte, error) { return nil, nil }
	for name, build := range map[string]func() (*idemnats.Handler, error){
		"nil engine": func() (*idemnats.Handler, error) { return idemnats.NewHandler(nil, "n", fn) },
		"nil fn":     func() (*idemnats.Handler, error) { return idemnats.NewHandler(e, "n", nil) },
		"empty name": func() (*idemnats.Handler, error) { return idemnats.NewHandler(e, "", fn) },
		"nil key":    func() (*idemnats.Handler, error) { return idemnats.NewHandler(e, "n", fn, idemnats.WithKey(nil)) },
		"nil codec": func() (*idemnats.Handler, error) {
			return idemnats.NewHandler(e, "n", fn, idemnats.WithErrorCodec(nil))
		},
		"neg delay":  func() (*idemnats.Handler, error) { return idemnats.NewHandler(e, "n", fn, idemnats.WithRetryDelay(-1)) },
		"nil option": func() (*idemnats.Handler, error) { return idemnats.NewHandler(e, "n", fn, nil) },
		"bad lease": func() (*idemnats.Handler, error) {
			return idemnats.NewHandler(e, "n", fn, idemnats.WithEngineOptions(idemkit.WithLease(0)))
		},
		"nil logger": func() (*idemnats.Handler, error) { return idemnats.NewHandler(e, "n", fn, idemnats.WithLogger(nil)) },
		"nil final":  func() (*idemnats.Handler, error) { return idemnats.NewHandler(e, "n", fn, idemnats.WithFinal(nil)) },
		"nil fingerp": func() (*idemnats.Handler, error) {
			return idemnats.NewHandler(e, "n", fn, idemnats.WithFingerprint(nil))
		},
		"cap under first": func() (*idemnats.Handler, error) {
			return idemnats.NewHandler(e, "n", fn, idemnats.WithBackoff(time.Second, time.Millisecond))
		},
		"zero attempts": func() (*idemnats.Handler, error) {
			return idemnats.NewHandler(e, "n", fn, idemnats.WithMaxAttempts(0))
		},
		"nil report": func() (*idemnats.Handler, error) { return idemnats.NewHandler(e, "n", fn, idemnats.WithReport(nil)) },
		"nil dead letter": func() (*idemnats.Handler, error) {
			return idemnats.NewHandler(e, "n", fn, idemnats.WithDeadLetter(nil, "s"))
		},
	} {
		if h, err := build(); h != nil || !errors.Is(err, idemkit.ErrInvalid) {
			t.Errorf("%s: %v, %v; want ErrInvalid", name, h, err)
		}
	}
}

func TestHandleMsgsBatch(t *testing.T) {
	var n atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", counting(&n, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h.HandleContext(ctx, newFakeMsg("old"))
	fakes := []*fakeMsg{newFakeMsg("a"), newFakeMsg("old"), newFakeMsg("a"), newFakeMsg(""), newFakeMsg("b")}
	msgs := make([]jetstream.Msg, len(fakes))
	for i, f := range fakes {
		msgs[i] = f
	}
	outs := h.HandleMsgs(ctx, msgs)
	want := []idemnats.Action{idemnats.Ack, idemnats.Ack, idemnats.Ack, idemnats.Term, idemnats.Ack}
	for i, out := range outs {
		if out.Action != want[i] || len(fakes[i].sent()) != 1 {
			t.Errorf("message %d: %+v sent %v, want %v once", i, out, fakes[i].sent(), want[i])
		}
	}
	if !outs[1].Replayed || !outs[2].Replayed || n.Load() != 3 {
		t.Fatalf("replay %+v, runs %d (want 3: old, a, b)", outs[1], n.Load())
	}
}

func TestWithInProgressSignalsWhileRunningAndStopsBeforeAck(t *testing.T) {
	m := newFakeMsg("m")
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", func(ctx context.Context, _ jetstream.Msg) ([]byte, error) {
		for { // run until the server has been told twice that the work goes on
			if len(m.sent()) >= 2 { // only InProgress can have been sent yet
				return nil, nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}, idemnats.WithInProgress(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out := h.HandleContext(ctx, m); out.Action != idemnats.Ack {
		t.Fatalf("outcome %+v, want ack", out)
	}
	sent := m.sent()
	if len(sent) < 3 || sent[len(sent)-1] != "ack" || slices.Contains(sent[:len(sent)-1], "ack") {
		t.Fatalf("sent %v, want in-progress signals then one final ack", sent)
	}
	// HandleContext waited for the signaller to stop: nothing follows the ack.
	if after := m.sent(); len(after) != len(sent) {
		t.Fatalf("sent after the ack: %v", after[len(sent):])
	}
	if _, err := idemnats.NewHandler(testkit.NewEngine(t), "n", func(context.Context, jetstream.Msg) ([]byte, error) { return nil, nil },
		idemnats.WithInProgress(0)); !errors.Is(err, idemkit.ErrInvalid) {
		t.Fatalf("interval 0: %v, want ErrInvalid", err)
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[idemnats.Action]string{idemnats.Ack: "ack", idemnats.Nak: "nak", idemnats.Term: "term", 7: "Action(7)"} {
		if got := a.String(); got != want {
			t.Errorf("%d: %q, want %q", int(a), got, want)
		}
	}
}
