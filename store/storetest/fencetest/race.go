package fencetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

// shape is the shape of a race at one key.
type shape struct {
	racers    int           // goroutines
	engines   int           // engines over the store, shared round robin
	lease     time.Duration // lease of every claim
	duration  time.Duration // how long new claims are made
	maxClaims int           // claims after which no new claim is made
}

// defaultShape keeps a run to a few seconds against a store in another
// process, with a few takeovers of an ended lease per second.
var defaultShape = shape{racers: 16, engines: 2, lease: 150 * time.Millisecond, duration: 2 * time.Second, maxClaims: 600}

// Report is what a race at one key did, for a test's log.
type Report struct {
	Claims    int // claims admitted
	Tokens    int // distinct tokens handed out (equal to Claims when none repeated)
	Takeovers int // owners whose key another caller took over meanwhile
	// StaleRefused counts the Complete calls of those owners that returned
	// ErrLeaseLost (it equals Takeovers when the store passes).
	StaleRefused int
	// DownstreamRefused counts the writes the fenced downstream refused,
	// each from an owner whose key was taken over.
	DownstreamRefused int
	Stalls            int // owners that stalled past their lease
	HeldByBeat        int // owners that stalled past their lease and kept the key with their heartbeat
	Released          int // owners that still held the key and released it
	LeaseLostEvents   int // EventLeaseLost reported by heartbeats that found their lease lost
}

// String returns the figures on one line.
func (r Report) String() string {
	return fmt.Sprintf("%d claims, %d distinct tokens, %d takeovers, %d stale completions refused, %d downstream writes refused, %d stalls past the lease, %d leases kept by a heartbeat through a stall, %d released, %d lease-lost events",
		r.Claims, r.Tokens, r.Takeovers, r.StaleRefused, r.DownstreamRefused, r.Stalls, r.HeldByBeat, r.Released, r.LeaseLostEvents)
}

// Run races 16 goroutines at one idempotency key of a store that open
// returns, for about 2 seconds (up to 10 until a key was taken over), and reports every broken rule with
// t.Error (see the package documentation). open is called once, with t;
// it returns a fresh store (or one with a fresh key space) and registers
// its own cleanup. The figures are logged.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	s := open(t)
	if s == nil {
		t.Fatal("fencetest: open returned nil")
	}
	rep, violations, err := race(t.Context(), s, defaultShape)
	for _, v := range violations {
		t.Error(v)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	if rep.Takeovers == 0 {
		t.Error("fencetest: no key was taken over from a stalled owner: the run checked nothing")
	}
}

// downstream is a system that fences its writes: it refuses a token lower
// than the highest it has seen for the key.
type downstream struct {
	mu      sync.Mutex
	highest uint64
}

func (d *downstream) write(fence uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if fence < d.highest {
		return false
	}
	d.highest = fence
	return true
}

// racer is the state a race shares between its goroutines.
type racer struct {
	shape   shape
	key     string
	engines []*idemkit.Engine
	down    downstream
	start   time.Time
	highest atomic.Uint64 // the highest token admitted so far
	lost    atomic.Int64  // EventLeaseLost

	mu         sync.Mutex
	tokens     map[uint64]bool
	rep        Report
	violations []string
}

func (r *racer) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) < 20 {
		r.violations = append(r.violations, "fencetest: "+fmt.Sprintf(format, args...))
	}
}

func (r *racer) count(f func(*Report)) {
	r.mu.Lock()
	f(&r.rep)
	r.mu.Unlock()
}

func (r *racer) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	elapsed := time.Since(r.start)
	// A run goes on past its duration, up to five times it, until a key
	// was taken over: on a loaded machine store calls are slow, and a run
	// without a takeover checks nothing.
	return r.rep.Claims >= r.shape.maxClaims || len(r.violations) > 0 ||
		elapsed >= r.shape.duration && (r.rep.Takeovers > 0 || elapsed >= 5*r.shape.duration)
}

// admit records the token of a claim admitted after a Begin that started
// when the highest token admitted was before: the token must be new and
// larger than before (the claim that got before had finished Begin, so
// its record, or a later one, was in the store when this Begin started).
func (r *racer) admit(fence, before uint64) {
	r.mu.Lock()
	r.rep.Claims++
	repeated := r.tokens[fence]
	r.tokens[fence] = true
	r.mu.Unlock()
	if repeated {
		r.fail("token %d handed out twice", fence)
	}
	if fence <= before {
		r.fail("token %d is not larger than %d, admitted before this claim began", fence, before)
	}
	for {
		h := r.highest.Load()
		if fence <= h || r.highest.CompareAndSwap(h, fence) {
			return
		}
	}
}

// engineOptions are the options of every engine of a run: a short lease,
// records that keep the key's token for a minute, and no logging.
func engineOptions(lease time.Duration, observer idemkit.Observer) []idemkit.Option {
	return []idemkit.Option{idemkit.WithLease(lease), idemkit.WithRetention(time.Minute), idemkit.WithObserver(observer)}
}

// race runs one race at a fresh key of s. It returns the figures, the
// rules broken, and an error when the run could not go on.
func race(ctx context.Context, s store.Store, sh shape) (Report, []string, error) {
	r := &racer{shape: sh, key: "fence-race-" + strconv.FormatInt(time.Now().UnixNano(), 36), tokens: map[uint64]bool{}}
	obs := idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		if ev.Kind == idemkit.EventLeaseLost {
			r.lost.Add(1)
		}
	})
	for range sh.engines {
		e, err := idemkit.New(s, engineOptions(sh.lease, obs)...)
		if err != nil {
			return Report{}, nil, fmt.Errorf("fencetest: engine: %w", err)
		}
		r.engines = append(r.engines, e)
	}
	r.start = time.Now()
	var wg sync.WaitGroup
	for g := range sh.racers {
		wg.Go(func() { r.run(ctx, g) })
	}
	wg.Wait()
	if len(r.violations) == 0 {
		r.finish(ctx)
	}
	r.rep.Tokens = len(r.tokens)
	r.rep.LeaseLostEvents = int(r.lost.Load())
	return r.rep, r.violations, nil
}

// run is one goroutine of a race. Even goroutines claim without a
// heartbeat and a third of their claims stall past the lease; odd ones
// keep a heartbeat and a tenth of their claims stall for one and a half
// leases. Every owner then writes to the fenced downstream, inspects the
// key, releases it if it still holds it, and otherwise completes, which
// must fail with ErrLeaseLost.
func (r *racer) run(ctx context.Context, g int) {
	e := r.engines[g%len(r.engines)]
	beat := g%2 == 1
	var opts []idemkit.Option
	if !beat {
		opts = append(opts, idemkit.WithoutHeartbeat())
	}
	lease := r.shape.lease
	// pause between attempts: poll again soon, to take the key over once
	// its lease ends, but give the others a chance after a claim.
	pause := func() { time.Sleep(time.Duration(2+rand.IntN(8)) * time.Millisecond) }
	for ; !r.done(); pause() {
		before := r.highest.Load()
		c, res, err := e.Begin(ctx, r.key, "", opts...)
		switch {
		case errors.Is(err, idemkit.ErrInProgress):
			continue
		case err != nil:
			r.fail("Begin: %v", err)
			return
		case c == nil:
			r.fail("Begin admitted no claim and returned no error (replayed %v)", res.Replayed)
			return
		}
		fence := c.Fence()
		r.admit(fence, before)

		var stall time.Duration
		switch {
		case !beat && rand.IntN(3) == 0:
			stall = lease + time.Duration(30+rand.IntN(70))*time.Millisecond
		case beat && rand.IntN(10) == 0:
			stall = lease + lease/2
		default:
			stall = time.Duration(rand.IntN(10)) * time.Millisecond
		}
		if stall > lease {
			r.count(func(rp *Report) { rp.Stalls++ })
		}
		time.Sleep(stall) // the owner's work, or a pause (GC, scheduler) past its lease

		accepted := r.down.write(fence)
		info, err := e.Inspect(ctx, idemkit.ModeDo, r.key)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			r.fail("Inspect: %v", err)
			c.Release(ctx)
			return
		case info.Fence < fence:
			r.fail("the key holds token %d after a claim with token %d", info.Fence, fence)
		}
		holds := err == nil && info.Fence == fence
		if !accepted {
			r.count(func(rp *Report) { rp.DownstreamRefused++ })
			if holds {
				r.fail("the fenced downstream refused token %d of the claim that holds the key", fence)
			}
		}
		if holds {
			c.Release(ctx)
			r.count(func(rp *Report) {
				rp.Released++
				if beat && stall > lease {
					rp.HeldByBeat++
				}
			})
			continue
		}
		r.count(func(rp *Report) { rp.Takeovers++ })
		if err := c.Complete(ctx, []byte("stale")); !errors.Is(err, idemkit.ErrLeaseLost) {
			r.fail("Complete of claim %d after a takeover (the key holds %d): %v, want ErrLeaseLost", fence, info.Fence, err)
			continue
		}
		r.count(func(rp *Report) { rp.StaleRefused++ })
	}
}

// finish claims the key once more after the race: the token must be the
// largest, the completion recorded, and a repeat must replay it.
func (r *racer) finish(ctx context.Context) {
	e := r.engines[0]
	deadline := time.Now().Add(10*r.shape.lease + 10*time.Second)
	for {
		before := r.highest.Load()
		c, _, err := e.Begin(ctx, r.key, "", idemkit.WithoutHeartbeat())
		if errors.Is(err, idemkit.ErrInProgress) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil || c == nil {
			r.fail("the final Begin: %v", err)
			return
		}
		fence := c.Fence()
		r.admit(fence, before)
		if !r.down.write(fence) {
			r.fail("the fenced downstream refused the final claim's token %d", fence)
		}
		if err := c.Complete(ctx, []byte("final")); err != nil {
			r.fail("the final Complete: %v", err)
			return
		}
		info, err := e.Inspect(ctx, idemkit.ModeDo, r.key)
		if err != nil || info.State != idemkit.StateCompleted || info.Fence != fence {
			r.fail("after the final Complete, Inspect = %s with token %d, %v; want %s with token %d", info.State, info.Fence, err, idemkit.StateCompleted, fence)
		}
		_, res, err := e.Begin(ctx, r.key, "")
		if err != nil || !res.Replayed || string(res.Value) != "final" {
			r.fail("a repeat after the final Complete got %q (replayed %v), %v", res.Value, res.Replayed, err)
		}
		return
	}
}
