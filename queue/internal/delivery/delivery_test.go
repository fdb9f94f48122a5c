package delivery

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
)

var errDeclined = errors.New("card declined")

func newProcessor(t *testing.T, s store.Store, cfg Config) *Processor {
	t.Helper()
	p, err := New(testkit.NewEngineOn(t, s), "test", "billing", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func effect(n *atomic.Int64, err error) Func {
	return func(context.Context) ([]byte, error) {
		n.Add(1)
		return []byte("ok"), err
	}
}

func TestOneRunsOnceThenReplays(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{})
	var n atomic.Int64
	ctx := context.Background()
	first := p.One(ctx, Request{Key: "m1", Run: effect(&n, nil)})
	if first.Action != Ack || !first.Ran || first.Err != nil {
		t.Fatalf("first delivery: %+v, want a run and an ack", first)
	}
	again := p.One(ctx, Request{Key: "m1", Run: effect(&n, nil)})
	if again.Action != Ack || !again.Replayed || again.Ran {
		t.Fatalf("redelivery: %+v, want a replayed ack", again)
	}
	if n.Load() != 1 {
		t.Fatalf("effect ran %d times, want 1", n.Load())
	}
}

func TestOneRacingDeliveriesRunOnce(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{})
	var runs atomic.Int64
	release := make(chan struct{})
	slow := func(context.Context) ([]byte, error) {
		runs.Add(1)
		<-release
		return nil, nil
	}
	const n = 64
	verdicts := make([]Verdict, n)
	var wg sync.WaitGroup
	var decided sync.WaitGroup
	decided.Add(n - 1)
	for i := range n {
		wg.Go(func() {
			verdicts[i] = p.One(context.Background(), Request{Key: "same", Run: slow})
			if !verdicts[i].Ran {
				decided.Done()
			}
		})
	}
	decided.Wait() // every loser has answered while the winner runs
	close(release)
	wg.Wait()
	var winners, inProgress int
	for _, v := range verdicts {
		switch {
		case v.Ran && v.Action == Ack:
			winners++
		case v.Action == Retry && errors.Is(v.Err, idemkit.ErrInProgress) && v.Delay > 0:
			inProgress++
		default:
			t.Errorf("unexpected verdict %+v", v)
		}
	}
	if winners != 1 || inProgress != n-1 || runs.Load() != 1 {
		t.Fatalf("winners %d, in progress %d, runs %d; want 1, %d, 1", winners, inProgress, runs.Load(), n-1)
	}
}

func TestOneFinalErrorOfCodecIsRecordedAndDropped(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{Codec: idemkit.FinalErrors(errDeclined)})
	var n atomic.Int64
	ctx := context.Background()
	v := p.One(ctx, Request{Key: "m", Run: effect(&n, errDeclined)})
	if v.Action != Drop || !errors.Is(v.Err, errDeclined) {
		t.Fatalf("final failure: %+v, want drop", v)
	}
	v = p.One(ctx, Request{Key: "m", Run: effect(&n, nil)})
	if v.Action != Drop || !v.Replayed || !errors.Is(v.Err, errDeclined) {
		t.Fatalf("duplicate of a final failure: %+v, want a replayed drop", v)
	}
	if n.Load() != 1 {
		t.Fatalf("effect ran %d times, want 1", n.Load())
	}
}

func TestOneFinalPredicateDropsWithoutRecording(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{Final: func(err error) bool { return errors.Is(err, errDeclined) }})
	var n atomic.Int64
	ctx := context.Background()
	if v := p.One(ctx, Request{Key: "m", Run: effect(&n, errDeclined)}); v.Action != Drop || !v.Ran {
		t.Fatalf("final failure: %+v, want drop", v)
	}
	if v := p.One(ctx, Request{Key: "m", Run: effect(&n, nil)}); v.Action != Ack || !v.Ran {
		t.Fatalf("later duplicate: %+v, want a run (nothing recorded)", v)
	}
}

func TestOneTransientFailureRetriesAndFreesTheKey(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{Backoff: Backoff{First: 3 * time.Second, Max: 3 * time.Second}})
	var n atomic.Int64
	ctx := context.Background()
	v := p.One(ctx, Request{Key: "m", Run: effect(&n, errors.New("db timeout"))})
	if v.Action != Retry || v.Delay != 3*time.Second || !v.Ran {
		t.Fatalf("transient failure: %+v, want retry after 3s", v)
	}
	if v := p.One(ctx, Request{Key: "m", Run: effect(&n, nil)}); v.Action != Ack || !v.Ran {
		t.Fatalf("redelivery: %+v, want a run", v)
	}
	if n.Load() != 2 {
		t.Fatalf("effect ran %d times, want 2", n.Load())
	}
}

func TestOneMismatchAndMissingKeyDrop(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{RefuseMismatch: true})
	var n atomic.Int64
	ctx := context.Background()
	p.One(ctx, Request{Key: "m", Fingerprint: "a", Run: effect(&n, nil)})
	if v := p.One(ctx, Request{Key: "m", Fingerprint: "b", Run: effect(&n, nil)}); v.Action != Drop || !v.Mismatch || !errors.Is(v.Err, idemkit.ErrMismatch) {
		t.Fatalf("key reused with another payload: %+v, want drop with ErrMismatch", v)
	}
	if v := p.One(ctx, Request{Run: effect(&n, nil)}); v.Action != Drop || !errors.Is(v.Err, idemkit.ErrInvalid) {
		t.Fatalf("no key: %+v, want drop with ErrInvalid", v)
	}
	if v := p.One(ctx, Request{KeyErr: errors.New("bad header"), Run: effect(&n, nil)}); v.Action != Drop || !errors.Is(v.Err, idemkit.ErrInvalid) {
		t.Fatalf("key error: %+v, want drop with ErrInvalid", v)
	}
	if n.Load() != 1 {
		t.Fatalf("effect ran %d times, want 1", n.Load())
	}
}

func TestOnePanicIsAFailedAttemptAndFreesTheKey(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{Codec: idemkit.FinalErrors(ErrPanic), Backoff: Backoff{First: time.Second, Max: time.Minute, Attempts: 3}})
	ctx := context.Background()
	v := p.One(ctx, Request{Key: "m", Attempt: 2, Run: func(context.Context) ([]byte, error) { panic("boom") }})
	var pe *PanicError
	if v.Action != Retry || v.Delay != 2*time.Second || !v.Ran || !v.Panicked || !errors.As(v.Err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("panicking effect: %+v, want a retry after 2s with the panic (never final, even for a codec that says so)", v)
	}
	v = p.One(ctx, Request{Key: "m", Attempt: 3, Run: func(context.Context) ([]byte, error) { panic("boom") }})
	if v.Action != Drop || !v.Exhausted || !v.Panicked || !errors.Is(v.Err, ErrPanic) {
		t.Fatalf("panicking effect on the last attempt: %+v, want an exhausted drop", v)
	}
	var n atomic.Int64
	if v := p.One(ctx, Request{Key: "m", Run: effect(&n, nil)}); v.Action != Ack || !v.Ran {
		t.Fatalf("after a panic: %+v, want a run", v)
	}
}

func TestNewRejectsBadArguments(t *testing.T) {
	e, err := idemkit.New(testkit.NewMem(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func() error{
		"nil engine":     func() error { _, err := New(nil, "t", "n", Config{}); return err },
		"empty name":     func() error { _, err := New(e, "t", "", Config{}); return err },
		"name w/ space":  func() error { _, err := New(e, "t", "a b", Config{}); return err },
		"negative delay": func() error { _, err := New(e, "t", "n", Config{Backoff: Backoff{First: -1}}); return err },
		"cap under first": func() error {
			_, err := New(e, "t", "n", Config{Backoff: Backoff{First: time.Second, Max: time.Millisecond}})
			return err
		},
		"negative attempts": func() error { _, err := New(e, "t", "n", Config{Backoff: Backoff{Attempts: -1}}); return err },
		"bad option":        func() error { _, err := New(e, "t", "n", Config{}, idemkit.WithLease(0)); return err },
	}
	for name, f := range cases {
		if err := f(); !errors.Is(err, idemkit.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
}

func TestNamesKeepKeysApart(t *testing.T) {
	s := testkit.NewMem(t)
	e, _ := idemkit.New(s, idemkit.WithObserver(nil))
	a, _ := New(e, "nats", "billing", Config{})
	b, _ := New(e, "nats", "shipping", Config{})
	c, _ := New(e, "amqp", "billing", Config{})
	var n atomic.Int64
	for _, p := range []*Processor{a, b, c} {
		if v := p.One(context.Background(), Request{Key: "m", Run: effect(&n, nil)}); !v.Ran {
			t.Fatalf("%s/%s: %+v, want a run", p.space, p.name, v)
		}
	}
}

func TestBatchDecidesEachDelivery(t *testing.T) {
	for name, s := range map[string]func(t *testing.T) store.Store{
		"memstore": func(t *testing.T) store.Store { return testkit.NewMem(t) },
		"boltstore (store.Batcher)": func(t *testing.T) store.Store {
			s, err := boltstore.Open(filepath.Join(t.TempDir(), "b.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := newProcessor(t, s(t), Config{Codec: idemkit.FinalErrors(errDeclined)})
			ctx := context.Background()
			var n atomic.Int64
			p.One(ctx, Request{Key: "done", Run: effect(&n, nil)})
			reqs := []Request{
				{Key: "new", Run: effect(&n, nil)},
				{Key: "done", Run: effect(&n, nil)},
				{Key: "new", Run: effect(&n, nil)}, // a duplicate inside the batch
				{Key: "", Run: effect(&n, nil)},
				{Key: "declined", Run: effect(&n, errDeclined)},
			}
			got := make([]Verdict, len(reqs))
			seen := 0
			p.Batch(ctx, reqs, func(i int, v Verdict) { got[i] = v; seen++ })
			if seen != len(reqs) {
				t.Fatalf("decided %d of %d", seen, len(reqs))
			}
			want := []Action{Ack, Ack, Ack, Drop, Drop}
			for i, v := range got {
				if v.Action != want[i] {
					t.Errorf("request %d: %+v, want %v", i, v, want[i])
				}
			}
			if !got[1].Replayed || !got[2].Replayed {
				t.Errorf("replay %+v, in-batch duplicate %+v", got[1], got[2])
			}
			if n.Load() != 3 { // done (before), new, declined
				t.Fatalf("effects %d, want 3", n.Load())
			}
		})
	}
}

func TestBatchPanicIsAFailedAttemptAndLaterEffectsRun(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{})
	ctx := context.Background()
	var n atomic.Int64
	verdicts := make([]Verdict, 2)
	p.Batch(ctx, []Request{
		{Key: "a", Run: func(context.Context) ([]byte, error) { panic("boom") }},
		{Key: "b", Run: effect(&n, nil)},
	}, func(i int, v Verdict) { verdicts[i] = v })
	if v := verdicts[0]; v.Action != Retry || !v.Panicked || !errors.Is(v.Err, ErrPanic) {
		t.Fatalf("panicking effect in a batch: %+v, want a retry", v)
	}
	if v := verdicts[1]; v.Action != Ack || !v.Ran {
		t.Fatalf("effect after a panicking one: %+v, want a run", v)
	}
	if v := p.One(ctx, Request{Key: "a", Run: effect(&n, nil)}); !v.Ran {
		t.Fatalf("key a after a panicking batch: %+v, want a run", v)
	}
}

func TestBatchCopyOfAFailedMessageRunsAgain(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{})
	var n atomic.Int64
	got := make([]Verdict, 2)
	p.Batch(context.Background(), []Request{
		{Key: "k", Run: effect(&n, errors.New("db timeout"))},
		{Key: "k", Run: effect(&n, nil)},
	}, func(i int, v Verdict) { got[i] = v })
	if got[0].Action != Retry || got[1].Action != Ack || !got[1].Ran || n.Load() != 2 {
		t.Fatalf("verdicts %+v, runs %d; want a retry, then the copy run", got, n.Load())
	}
}

func TestBatchRacingOverlappingBatchesRunEachKeyOnce(t *testing.T) {
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bolt.Close() })
	for name, s := range map[string]store.Store{"memstore": testkit.NewMem(t), "boltstore": bolt} {
		t.Run(name, func(t *testing.T) {
			p := newProcessor(t, s, Config{})
			const goroutines, keys = 64, 8
			var runs [keys]atomic.Int64
			var acked atomic.Int64
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					var reqs []Request
					for k := range keys { // each batch starts at another key
						key := (g + k) % keys
						reqs = append(reqs, Request{Key: "k" + string(rune('0'+key)), Run: effect(&runs[key], nil)})
					}
					p.Batch(context.Background(), reqs, func(_ int, v Verdict) {
						if v.Action == Ack {
							acked.Add(1)
						}
					})
				})
			}
			wg.Wait()
			for k := range keys {
				if n := runs[k].Load(); n != 1 {
					t.Errorf("key %d ran %d times, want 1", k, n)
				}
			}
			if acked.Load() < keys {
				t.Fatalf("%d acks, want at least one per key", acked.Load())
			}
		})
	}
}

// TestOneOversizedResultIsAckedOnRedelivery: an effect whose result was
// too large to keep ran once and succeeded; its key keeps a terminal
// record, and a redelivery is acked as a replay, never dropped as a final
// failure (which would dead-letter a message whose work is done).
func TestOneOversizedResultIsAckedOnRedelivery(t *testing.T) {
	e, err := idemkit.New(testkit.NewMem(t), idemkit.WithObserver(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(e, "test", "billing", Config{}, idemkit.WithMaxResultSize(1))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	ctx := context.Background()
	first := p.One(ctx, Request{Key: "m1", Run: effect(&n, nil)})
	if first.Action != Ack || !first.Ran {
		t.Fatalf("first delivery: %+v, want a run and an ack", first)
	}
	for range 2 {
		again := p.One(ctx, Request{Key: "m1", Run: effect(&n, nil)})
		if again.Action != Ack || !again.Replayed || again.Ran {
			t.Fatalf("redelivery: %+v, want a replayed ack", again)
		}
	}
	if n.Load() != 1 {
		t.Fatalf("effect ran %d times, want 1", n.Load())
	}
}

// flakyStore fails the calls it is told to, once each.
type flakyStore struct {
	store.Store
	failCAS   atomic.Pointer[error] // the next CompareAndSwap (a Complete)
	failSetNX atomic.Bool           // every SetNX (a claim)
}

func (s *flakyStore) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if err := s.failCAS.Swap(nil); err != nil {
		return false, *err
	}
	return s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

func (s *flakyStore) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	if s.failSetNX.Load() {
		return false, store.Entry{}, store.Unavailable("setnx", errors.New("connection refused"))
	}
	return s.Store.SetNX(ctx, k, v, ttl)
}

// TestBatchCopyOfASucceededMessageNeverRunsAgain: the first copy of a key
// in a batch runs and succeeds, but its result cannot be recorded (the
// store fails the write: the key is released, or stays in progress until
// its lease ends). The work is done: the copy in the same batch is acked,
// neither run again nor sent back to run after the lease.
func TestBatchCopyOfASucceededMessageNeverRunsAgain(t *testing.T) {
	for name, storeErr := range map[string]error{
		"record refused":    errors.New("disk I/O error"),
		"store unavailable": store.Unavailable("cas", errors.New("connection reset")),
	} {
		t.Run(name, func(t *testing.T) {
			s := &flakyStore{Store: testkit.NewMem(t)}
			p := newProcessor(t, s, Config{})
			var n atomic.Int64
			run := func(context.Context) ([]byte, error) {
				if n.Add(1) == 1 {
					s.failCAS.Store(&storeErr) // fails the first run's Complete
				}
				return []byte("ok"), nil
			}
			got := make([]Verdict, 3)
			p.Batch(context.Background(), []Request{{Key: "k", Run: run}, {Key: "k", Run: run}, {Key: "k", Run: run}},
				func(i int, v Verdict) { got[i] = v })
			if n.Load() != 1 {
				t.Fatalf("effect ran %d times, want 1; verdicts %+v", n.Load(), got)
			}
			for i, v := range got {
				if v.Action != Ack {
					t.Errorf("copy %d: %+v, want ack", i, v)
				}
			}
		})
	}
}

// TestBatchCopiesRunOnceUnderFailOpen: with the store down under FailOpen
// every delivery runs unguarded, but copies of one key in one batch are
// known duplicates: the work runs once and the copies are acked.
func TestBatchCopiesRunOnceUnderFailOpen(t *testing.T) {
	s := &flakyStore{Store: testkit.NewMem(t)}
	s.failSetNX.Store(true)
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(e, "test", "billing", Config{}, idemkit.WithFailureMode(idemkit.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	got := make([]Verdict, 3)
	p.Batch(context.Background(), []Request{
		{Key: "k", Run: effect(&n, nil)}, {Key: "other", Run: effect(&n, nil)}, {Key: "k", Run: effect(&n, nil)},
	}, func(i int, v Verdict) { got[i] = v })
	if n.Load() != 2 {
		t.Fatalf("effects ran %d times, want 2 (k once, other once); verdicts %+v", n.Load(), got)
	}
	for i, v := range got {
		if v.Action != Ack {
			t.Errorf("delivery %d: %+v, want ack", i, v)
		}
	}
}

// TestLongAndBinaryKeysStayDistinct: message keys that differ only past a
// long common prefix, only in one binary byte, or only around the
// characters the store key escapes, are different messages: each runs
// once, and its own copy replays.
func TestLongAndBinaryKeysStayDistinct(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{})
	long := strings.Repeat("k", 300)
	keys := []string{long + "a", long + "b", "\x00\xff", "\x00\xfe", "\xff", "a:b", "a%3Ab", "a b", "a%20b", "#x", "%"}
	var n atomic.Int64
	ctx := context.Background()
	for _, k := range keys {
		if v := p.One(ctx, Request{Key: k, Run: effect(&n, nil)}); !v.Ran || v.Action != Ack {
			t.Fatalf("key %q: %+v, want a run", k, v)
		}
	}
	for _, k := range keys {
		if v := p.One(ctx, Request{Key: k, Run: effect(&n, nil)}); !v.Replayed || v.Action != Ack {
			t.Fatalf("copy of key %q: %+v, want a replay", k, v)
		}
	}
	if n.Load() != int64(len(keys)) {
		t.Fatalf("effects %d, want %d", n.Load(), len(keys))
	}
}
