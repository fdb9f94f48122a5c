package idemnats_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemnats"
)

// bodyMsg is a fake message with body and a Nats-Msg-Id of its own.
func bodyMsg(id, body string) *fakeMsg {
	m := newFakeMsg(id)
	m.data = []byte(body)
	return m
}

func TestBodyKeyBadMessagesAreTerminated(t *testing.T) {
	var n atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "payments", counting(&n, nil), idemnats.WithBodyKey("data.txn"))
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"data":{}}`, `{"data":{"txn":{"a":1}}}`, `{"data":{"txn":null}}`, `{"data":{"txn":""}}`,
		`{"data":{"txn":"x"}`, `{"data":{"txn":"a","txn":"b"}}`, `txn=1`, ``} {
		out := idemnatsHandle(h, bodyMsg("m-"+body, body))
		if out.Action != idemnats.Term || !errors.Is(out.Err, idemkit.ErrInvalid) {
			t.Errorf("%q: %+v, want term with ErrInvalid", body, out)
		}
	}
	if n.Load() != 0 {
		t.Fatalf("%d bad messages ran", n.Load())
	}
}

func idemnatsHandle(h *idemnats.Handler, m *fakeMsg) idemnats.Outcome {
	return h.HandleContext(context.Background(), m)
}

func TestBodyKeyWithIncludeAndVolatile(t *testing.T) {
	var n atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "payments", counting(&n, nil),
		idemnats.WithBodyKey("txn"), idemnats.WithInclude("amount"), idemnats.WithVolatile("amount.note"))
	if err != nil {
		t.Fatal(err)
	}
	first := idemnatsHandle(h, bodyMsg("a", `{"txn":7,"amount":{"v":5,"note":"x"},"sent":1}`))
	again := idemnatsHandle(h, bodyMsg("b", `{"txn":7.0,"amount":{"v":5,"note":"y"},"sent":2}`))
	other := idemnatsHandle(h, bodyMsg("c", `{"txn":7,"amount":{"v":6},"sent":1}`))
	if !first.Ran || !again.Replayed || other.Action != idemnats.Term || !errors.Is(other.Err, idemkit.ErrMismatch) || n.Load() != 1 {
		t.Fatalf("first %+v, again %+v, other %+v, runs %d", first, again, other, n.Load())
	}
}

// On a real server: each event is published many times, under distinct
// Nats-Msg-Ids (so JetStream's duplicate window keeps them all) and with
// a changing send time, and consumed by several consumers at once: each
// event's effect runs once, and the stream drains.
func TestBodyKeyOnServerRunsEachEventOnce(t *testing.T) {
	js := connect(t)
	s, subject := newStream(t, js)
	c := newConsumer(t, s, 5*time.Second)
	const events, copies = 5, 12
	for i := range copies {
		for e := range events {
			publish(t, js, subject, fmt.Sprintf(`{"event":{"id":"evt-%d"},"sent_at":%d}`, e, i), jetstream.MsgIDHeader, fmt.Sprintf("m-%d-%d", e, i))
		}
	}
	var mu sync.Mutex
	effects := map[string]int{}
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "payments", func(_ context.Context, m jetstream.Msg) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		effects[string(m.Data()[:len(`{"event":{"id":"evt-0"}`)])]++
		return nil, nil
	}, idemnats.WithBodyKey("event.id"), idemnats.WithVolatile("sent_at"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 4 {
		wg.Go(func() {
			// Until the stream is empty: a copy nakked while its
			// first was in flight comes back after the retry hint.
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
				outs, err := h.Fetch(context.Background(), c, 7, jetstream.FetchMaxWait(300*time.Millisecond))
				if err != nil {
					failed.Add(1)
					return
				}
				for _, out := range outs {
					if out.Err != nil && out.Action != idemnats.Nak {
						failed.Add(1)
					}
				}
				if len(outs) > 0 {
					continue
				}
				if info, err := s.Info(context.Background()); err == nil && info.State.Msgs == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d failures", failed.Load())
	}
	waitDrained(t, s)
	if len(effects) != events {
		t.Fatalf("effects %v, want %d events", effects, events)
	}
	for e, k := range effects {
		if k != 1 {
			t.Errorf("%s ran %d times", e, k)
		}
	}
}
