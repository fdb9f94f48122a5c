package idemrelay_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/queue/idemrelay"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// runRelays runs relays over s until its outbox is empty (bounded by a
// minute), then stops them and returns their counters summed.
func runRelays(t *testing.T, s *sqlstore.Store, relays []*idemrelay.Relay) idemrelay.Stats {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range relays {
		wg.Go(func() { r.Run(ctx) })
	}
	deadline := time.Now().Add(time.Minute)
	for pending(t, s) > 0 {
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			t.Fatalf("%d rows still pending after a minute", pending(t, s))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	var sum idemrelay.Stats
	for _, r := range relays {
		st := r.Stats()
		sum.Batches += st.Batches
		sum.Published += st.Published
		sum.Duplicates += st.Duplicates
		sum.Failed += st.Failed
		sum.Errors += st.Errors
	}
	return sum
}

// dieAfterFirstPublish is a relay option that ends the relay's goroutine
// between its first confirmed batch and the removal of its rows, as a
// crash there would: the batch's transaction rolls back and the rows,
// published already, stay for the other relays. It records the ids so
// abandoned in lost.
func dieAfterFirstPublish(lost *abandoned) idemrelay.Option {
	return idemrelay.WithAfterPublish(func(confirmed []string) {
		if len(confirmed) > 0 {
			lost.add(confirmed)
			runtime.Goexit()
		}
	})
}

// abandoned counts, per message id, the times a dying relay left its row
// after the broker's confirm.
type abandoned struct {
	mu  sync.Mutex
	ids map[string]int
}

func (a *abandoned) add(ids []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids == nil {
		a.ids = map[string]int{}
	}
	for _, id := range ids {
		a.ids[id]++
	}
}

// len counts the distinct ids abandoned.
func (a *abandoned) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ids)
}

// times returns how many times id was abandoned.
func (a *abandoned) times(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids[id]
}

// total counts the abandonments.
func (a *abandoned) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.ids {
		n += c
	}
	return n
}

// TestJetStreamRelaysRacePublishEachOnce: six relays, two of which die
// between the broker's confirm and the removal of their first batch, race
// over one outbox on each database. Each committed event is stored in the
// stream exactly once: every re-publish of an abandoned batch is dropped
// by Nats-Msg-Id; no event of a rolled-back transaction is published.
func TestJetStreamRelaysRacePublishEachOnce(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := newOutbox(t, b)
			stream, subject := newStream(t, connect(t))
			const events = 400
			ids := enqueue(t, b, s, subject, 0, events)
			var lost abandoned
			var relays []*idemrelay.Relay
			for i := range 6 {
				pub, err := idemrelay.NewJetStream(connect(t))
				if err != nil {
					t.Fatal(err)
				}
				opts := []idemrelay.Option{idemrelay.WithBatchSize(25), idemrelay.WithPollInterval(10 * time.Millisecond)}
				if i < 2 {
					opts = append(opts, dieAfterFirstPublish(&lost))
				}
				r, err := idemrelay.New(s, pub, opts...)
				if err != nil {
					t.Fatal(err)
				}
				relays = append(relays, r)
			}
			sum := runRelays(t, s, relays)
			counts, stored := streamCounts(t, stream)
			if stored != events || len(counts) != events {
				t.Fatalf("stream holds %d messages of %d ids, want %d once each", stored, len(counts), events)
			}
			for id, n := range counts {
				if !ids[id] || n != 1 {
					t.Errorf("message %s: stored %d times, committed %v", id, n, ids[id])
				}
			}
			// The dead relays' batches never counted: the others published
			// (and removed) every row, the abandoned ones as duplicates.
			if lost.len() == 0 || sum.Duplicates != uint64(lost.len()) || sum.Published != events {
				t.Fatalf("abandoned %d, re-published as duplicates %d, removed %d; want duplicates = abandoned > 0, removed = %d",
					lost.len(), sum.Duplicates, sum.Published, events)
			}
			t.Logf("%s: %d events, %d abandoned after their confirm and re-published, %d stored, %d batches", b.name, events, lost.len(), stored, sum.Batches)
		})
	}
}
