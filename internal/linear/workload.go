package linear

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemkit/idemkit/store"
)

// TTL is the time to live of every entry the workload writes: far longer
// than any history, so that no key expires while one is recorded.
const TTL = time.Hour

// Workload describes one history: Clients goroutines, each issuing random
// operations on Keys keys (under Prefix) with values drawn from an
// alphabet of Values values (the empty value among them), until each has
// issued MaxOps operations or Duration has passed. Each operation has
// OpTimeout to answer; one that does not, or fails with any error other
// than store.ErrNotFound, is recorded with an unknown outcome. Each
// client waits a random time up to Think between operations, so that a
// history spans Duration (and the faults injected meanwhile).
type Workload struct {
	Clients   int
	Keys      int
	Values    int
	MaxOps    int
	Duration  time.Duration
	OpTimeout time.Duration
	Think     time.Duration
	Backoff   time.Duration
	Prefix    string
	Seed      uint64
	// Stop, when not nil, also ends the history when it closes.
	Stop <-chan struct{} `json:"-"`
	// Origin, when not zero, is the instant the operations' times are
	// offsets from (by default the history's start): processes that record
	// parts of one history share one, taken without a monotonic clock
	// reading (Round(0)), and Merge joins their parts.
	Origin time.Time
}

// Stats counts what a history holds.
type Stats struct {
	Ops     int // operations recorded (every batch item counts as one)
	Unknown int // of which with an unknown outcome
	Batches int // SetNXBatch calls
	NotSent int // operations left out: they never reached the store
	// LongTTL counts entries returned with a remaining TTL above the TTL
	// they were written with (see the package documentation).
	LongTTL int
	// Errors holds up to 5 of the errors that made outcomes unknown.
	Errors []string
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Ops += o.Ops
	s.Unknown += o.Unknown
	s.Batches += o.Batches
	s.NotSent += o.NotSent
	s.LongTTL += o.LongTTL
	for _, e := range o.Errors {
		if len(s.Errors) < 5 {
			s.Errors = append(s.Errors, e)
		}
	}
}

// ErrNotSent is wrapped in an operation's error to say that the operation
// certainly did not reach the store (a test harness that knows it had no
// server to send it to): the operation is left out of the history.
var ErrNotSent = errors.New("linear: operation not sent")

// notSent reports whether err says that the operation never reached the
// store: it wraps ErrNotSent, or a failure to dial (no connection, no
// request), as while a server restarts. Leaving out an operation that did
// take effect could only make the checker report a violation that is not
// there, never hide one; leaving out the operations a down server refused
// keeps the histories small enough to check.
func notSent(err error) bool {
	if errors.Is(err, ErrNotSent) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// errContract reports an answer no valid store gives (ErrInvalid for a
// valid argument, ErrCorrupt, a TTL outside (0, TTL]): a defect the
// history checker would not see.
var errContract = errors.New("linear: contract violated")

// recorder collects the operations of one history.
type recorder struct {
	start time.Time
	// origin is what times are offsets from: Workload.Origin, or start.
	origin time.Time
	mu     sync.Mutex
	ops    []porcupine.Operation
	stats  Stats
	errs   []error
	ids    atomic.Int64
}

func (r *recorder) now() int64 { return int64(time.Since(r.origin)) }

func (r *recorder) add(op porcupine.Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	r.stats.Ops++
	if op.Output.(Output).Unknown {
		r.stats.Unknown++
	}
}

func (r *recorder) unknown(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.stats.Errors) < 5 {
		r.stats.Errors = append(r.stats.Errors, err.Error())
	}
}

func (r *recorder) dropped() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.NotSent++
}

func (r *recorder) longTTL() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.LongTTL++
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 10 {
		r.errs = append(r.errs, err)
	}
}

// Run records one history of w against s and returns its operations,
// every unknown outcome answered at the history's end (porcupine's way of
// saying it may have taken effect at any time after its call, or never).
// The error reports contract violations seen on the way.
func Run(s store.Store, w Workload) ([]porcupine.Operation, Stats, error) {
	r := &recorder{start: time.Now(), origin: w.Origin}
	if r.origin.IsZero() {
		r.origin = r.start
	}
	batcher, _ := s.(store.Batcher)
	deadline := r.start.Add(w.Duration)
	var wg sync.WaitGroup
	for c := range w.Clients {
		rng := rand.New(rand.NewPCG(w.Seed, uint64(c)))
		wg.Go(func() {
			cl := &client{r: r, s: s, b: batcher, w: w, rng: rng, id: int(r.ids.Add(1) - 1)}
			for i := 0; i < w.MaxOps && time.Now().Before(deadline) && !closed(w.Stop); i++ {
				cl.failed = false
				cl.one()
				pause := time.Duration(0)
				if w.Think > 0 {
					pause = time.Duration(rng.Int64N(int64(w.Think)))
				}
				if cl.failed {
					pause += w.Backoff
				}
				time.Sleep(pause)
			}
		})
	}
	wg.Wait()
	end := r.now() + 1
	for i := range r.ops {
		if r.ops[i].Output.(Output).Unknown {
			r.ops[i].Return = end
		}
	}
	return r.ops, r.stats, errors.Join(r.errs...)
}

// closed reports whether c is closed; a nil channel never is.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// client is one concurrent caller.
type client struct {
	r   *recorder
	s   store.Store
	b   store.Batcher
	w   Workload
	rng *rand.Rand
	id  int
	// failed is set when the last operation's outcome is unknown.
	failed bool
}

func (c *client) key() string { return fmt.Sprintf("%sk%d", c.w.Prefix, c.rng.IntN(c.w.Keys)) }

// value draws from the alphabet "", "a", "b", ...
func (c *client) value() string {
	n := c.rng.IntN(c.w.Values)
	if n == 0 {
		return ""
	}
	return string(rune('a' + n - 1))
}

// one issues one random operation and records it.
func (c *client) one() {
	ctx, cancel := context.WithTimeout(context.Background(), c.w.OpTimeout)
	defer cancel()
	in := Input{Key: c.key()}
	var out Output
	var err error
	call := c.r.now()
	switch p := c.rng.IntN(100); {
	case p < 25:
		in.Kind, in.Value = SetNX, c.value()
		var set bool
		var ent store.Entry
		set, ent, err = c.s.SetNX(ctx, in.Key, []byte(in.Value), TTL)
		out.OK = set
		if err == nil && !set {
			out.Value = string(ent.Value)
			err = c.checkEntry("SetNX", in.Key, ent)
		}
	case p < 45:
		in.Kind = Get
		var ent store.Entry
		ent, err = c.s.Get(ctx, in.Key)
		if err == nil {
			out.OK, out.Value = true, string(ent.Value)
			err = c.checkEntry("Get", in.Key, ent)
		}
	case p < 65:
		in.Kind, in.Old, in.Value = CompareAndSwap, c.value(), c.value()
		out.OK, err = c.s.CompareAndSwap(ctx, in.Key, []byte(in.Old), []byte(in.Value), TTL)
	case p < 78:
		in.Kind, in.Old = CompareAndDelete, c.value()
		out.OK, err = c.s.CompareAndDelete(ctx, in.Key, []byte(in.Old))
	case p < 90 || c.b == nil:
		in.Kind = Consume
		var v []byte
		v, err = c.s.Consume(ctx, in.Key)
		if err == nil {
			out.OK, out.Value = true, string(v)
		}
	default:
		c.batch(ctx, call)
		return
	}
	if errors.Is(err, store.ErrNotFound) && (in.Kind == Get || in.Kind == Consume) {
		err = nil
	}
	c.record(in, out, call, err)
}

// batch claims two or three distinct keys with SetNXBatch and records one
// SetNX per item, each within the batch's interval.
func (c *client) batch(ctx context.Context, call int64) {
	n := min(2+c.rng.IntN(2), c.w.Keys)
	perm := c.rng.Perm(c.w.Keys)[:n]
	items := make([]store.BatchItem, n)
	for i, k := range perm {
		items[i] = store.BatchItem{Key: fmt.Sprintf("%sk%d", c.w.Prefix, k), Value: []byte(c.value()), TTL: TTL}
	}
	res, err := c.b.SetNXBatch(ctx, items)
	c.r.mu.Lock()
	c.r.stats.Batches++
	c.r.mu.Unlock()
	if err == nil && len(res) != n {
		err = fmt.Errorf("%w: SetNXBatch of %d items returned %d results", errContract, n, len(res))
	}
	ret := c.r.now()
	for i, it := range items {
		in := Input{Kind: SetNX, Key: it.Key, Value: string(it.Value), Batch: true}
		var out Output
		var ierr error = err
		if err == nil {
			out.OK = res[i].Set
			if !out.OK {
				out.Value = string(res[i].Existing.Value)
				ierr = c.checkEntry("SetNXBatch", it.Key, res[i].Existing)
			}
		}
		c.recordAt(in, out, call, ret, ierr)
	}
	if err != nil {
		c.id = int(c.r.ids.Add(1) - 1)
	}
}

func (c *client) record(in Input, out Output, call int64, err error) {
	c.recordAt(in, out, call, c.r.now(), err)
	if err != nil {
		// A client whose call may still be in flight is, in the
		// visualization, a new client from now on.
		c.id = int(c.r.ids.Add(1) - 1)
	}
}

func (c *client) recordAt(in Input, out Output, call, ret int64, err error) {
	if err != nil && notSent(err) {
		c.failed = true
		c.r.dropped()
		return
	}
	if err != nil {
		c.failed = true
		if errors.Is(err, errContract) || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrCorrupt) {
			c.r.fail(fmt.Errorf("%v(%s): %w", in.Kind, in.Key, err))
		} else {
			c.r.unknown(err)
		}
		out = Output{Unknown: true}
	}
	c.r.add(porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret})
}

// checkEntry checks an entry the store returned: a value, and a positive
// TTL. A TTL above the one every entry is written with is counted, not
// failed (see the package documentation).
func (c *client) checkEntry(op, key string, ent store.Entry) error {
	if ent.TTL <= 0 {
		return fmt.Errorf("%w: %s(%s) returned TTL %v, want it positive", errContract, op, key, ent.TTL)
	}
	if ent.TTL > TTL {
		c.r.longTTL()
	}
	if ent.Value == nil {
		return fmt.Errorf("%w: %s(%s) returned a nil value", errContract, op, key)
	}
	return nil
}
