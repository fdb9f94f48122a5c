package linear

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

// EngineWorkload describes one history of the engine's claims: Clients
// goroutines, sharing Engines engines over one store, claim keys of Keys
// slots with Begin and a lease of Lease, until Duration has passed. Even
// clients claim without a heartbeat (WithoutHeartbeat) and a third of
// their claims stall past the lease, so that another client takes the key
// over; odd clients keep a heartbeat and a tenth of their claims stall for
// one and a half leases. A claim that stalled is completed; one that did
// not is completed one time in four and released otherwise. A slot's key
// is replaced by a fresh one once a result is recorded for it (a
// completion, or a Begin that replays it), so that claims go on; one
// claim in five goes to the slot's previous key instead, which must
// replay its result. Every call has OpTimeout to answer.
type EngineWorkload struct {
	Clients   int
	Engines   int
	Keys      int
	Duration  time.Duration
	Lease     time.Duration
	OpTimeout time.Duration
	Backoff   time.Duration
	Prefix    string
	Seed      uint64
	// Stop, when not nil, also ends the history when it closes.
	Stop <-chan struct{} `json:"-"`
	// Paused says that the clients' process is paused from outside
	// (SIGSTOP) while the history is recorded, and that other processes
	// claim the same keys: claims then do not stall on purpose, their work
	// takes up to half the lease, a claim that outlived its lease (the
	// process was paused) is completed and one that did not is completed
	// one time in twenty and released otherwise, so that keys stay open
	// and a pause during a claim ends in a Complete. A slot's key is that
	// of the current period of ten leases since Origin (one claim in five
	// goes to the previous period's key), since processes cannot share
	// which keys have a result.
	Paused bool
	// Origin, when not zero, is the instant the observations' times are
	// offsets from, as Workload.Origin.
	Origin time.Time
	// Do makes the clients claim through Engine.Do instead of Begin and
	// Complete: the work is Do's fn, which learns its claim's token from
	// FenceFromContext, stalls as Begin's claims do, and always returns a
	// result (Do completes it). A Do is recorded as an Admit from its call
	// to fn's start and a Complete from fn's return to Do's, or as one
	// Begin observation when fn did not run.
	Do bool
}

// EngineStats counts what a history of the engine's claims holds.
type EngineStats struct {
	Ops       int // observations recorded
	Admitted  int // claims admitted
	Completed int // Complete calls that recorded their result
	Lost      int // Complete calls that returned ErrLeaseLost
	Unknown   int // Begin and Complete calls whose outcome is unknown
	Busy      int // Begin calls that returned ErrInProgress
	Replayed  int // Begin calls that replayed a result
	Stalls    int // claims stalled past their lease
	Keys      int // keys claimed (slots times the keys each went through)
	NotSent   int // Begin calls left out: they never reached the store
	// Errors holds up to 5 of the errors that made outcomes unknown.
	Errors []string
}

// Add adds o to s.
func (s *EngineStats) Add(o EngineStats) {
	s.Ops += o.Ops
	s.Admitted += o.Admitted
	s.Completed += o.Completed
	s.Lost += o.Lost
	s.Unknown += o.Unknown
	s.Busy += o.Busy
	s.Replayed += o.Replayed
	s.Stalls += o.Stalls
	s.Keys += o.Keys
	s.NotSent += o.NotSent
	for _, e := range o.Errors {
		if len(s.Errors) < 5 {
			s.Errors = append(s.Errors, e)
		}
	}
}

// engineRecorder collects one history of the engine's claims.
type engineRecorder struct {
	w      EngineWorkload
	start  time.Time
	origin time.Time      // Workload.Origin, or start
	gens   []atomic.Int64 // the current key of each slot
	ids    atomic.Int64

	mu    sync.Mutex
	ops   []porcupine.Operation
	stats EngineStats
	errs  []error
}

func (r *engineRecorder) now() int64 { return int64(time.Since(r.origin)) }

func (r *engineRecorder) count(f func(*EngineStats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

func (r *engineRecorder) add(id int, in ClaimInput, out ClaimOutput, call, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
	r.stats.Ops++
	if out.Unknown || in.Kind == BeginFailed {
		r.stats.Unknown++
	}
}

func (r *engineRecorder) unknown(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.stats.Errors) < 5 {
		r.stats.Errors = append(r.stats.Errors, err.Error())
	}
}

func (r *engineRecorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 10 {
		r.errs = append(r.errs, err)
	}
}

// unknownEnd reports whether a history's observation ends with it (its
// outcome unknown): porcupine's way of saying it may have taken effect at
// any instant after its call, or never.
func unknownEnd(op porcupine.Operation) bool {
	return op.Input.(ClaimInput).Kind == BeginFailed || op.Output.(ClaimOutput).Unknown
}

// RunEngine records one history of w's claims on engines over s and
// returns its observations, those with an unknown outcome answered at the
// history's end. The error reports answers no engine gives.
func RunEngine(s store.Store, w EngineWorkload) ([]porcupine.Operation, EngineStats, error) {
	r := &engineRecorder{w: w, gens: make([]atomic.Int64, w.Keys)}
	obs := idemkit.ObserverFunc(func(context.Context, idemkit.Event) {})
	var engines []*idemkit.Engine
	for range max(w.Engines, 1) {
		e, err := idemkit.New(s, idemkit.WithLease(w.Lease), idemkit.WithRetention(time.Minute), idemkit.WithObserver(obs))
		if err != nil {
			return nil, EngineStats{}, err
		}
		engines = append(engines, e)
	}
	r.start, r.origin = time.Now(), w.Origin
	if r.origin.IsZero() {
		r.origin = r.start
	}
	deadline := r.start.Add(w.Duration)
	var wg sync.WaitGroup
	for c := range w.Clients {
		cl := &claimer{r: r, e: engines[c%len(engines)], beat: c%2 == 1,
			rng: rand.New(rand.NewPCG(w.Seed, uint64(c))), id: int(r.ids.Add(1) - 1)}
		wg.Go(func() {
			for time.Now().Before(deadline) && !closed(w.Stop) {
				time.Sleep(cl.one())
			}
		})
	}
	wg.Wait()
	end := r.now() + 1
	for i := range r.ops {
		if unknownEnd(r.ops[i]) {
			r.ops[i].Return = end
		}
	}
	for i := range r.gens {
		r.stats.Keys += int(r.gens[i].Load()) + 1
	}
	return r.ops, r.stats, errors.Join(r.errs...)
}

// claimer is one concurrent client of the engine.
type claimer struct {
	r    *engineRecorder
	e    *idemkit.Engine
	beat bool
	rng  *rand.Rand
	id   int
}

// renew makes the client a new one in the visualization, after a call
// whose outcome is unknown may still be in flight.
func (c *claimer) renew() { c.id = int(c.r.ids.Add(1) - 1) }

// one claims a key once and returns the pause before the next claim.
func (c *claimer) one() time.Duration {
	w := c.r.w
	slot := c.rng.IntN(w.Keys)
	gen := c.r.gens[slot].Load()
	if gen > 0 && c.rng.IntN(5) == 0 {
		gen-- // a repeat of a settled key: it must replay
	}
	key := fmt.Sprintf("%sk%d.%d", w.Prefix, slot, gen)
	settled := func() { c.r.gens[slot].CompareAndSwap(gen, gen+1) }
	if w.Paused {
		// Processes share no memory: a slot's key is that of the current
		// period of ten leases since the shared origin.
		epoch := c.r.now() / int64(10*w.Lease)
		if epoch > 0 && c.rng.IntN(5) == 0 {
			epoch-- // the previous period's key
		}
		key = fmt.Sprintf("%sk%d.e%d", w.Prefix, slot, epoch)
		settled = func() {}
	}
	poll := time.Duration(2+c.rng.IntN(8)) * time.Millisecond

	var opts []idemkit.Option
	if !c.beat {
		opts = append(opts, idemkit.WithoutHeartbeat())
	}
	if w.Do {
		return c.do(key, opts, settled, poll)
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	call := c.r.now()
	claim, res, err := c.e.Begin(ctx, key, "", opts...)
	ret := c.r.now()
	cancel()
	in := ClaimInput{Key: key}
	switch {
	case err == nil && claim != nil:
		in.Kind, in.Fence = Admit, claim.Fence()
		c.r.add(c.id, in, ClaimOutput{}, call, ret)
		c.r.count(func(s *EngineStats) { s.Admitted++ })
	case err == nil && res.Replayed:
		in.Kind = Replay
		c.r.add(c.id, in, ClaimOutput{}, call, ret)
		c.r.count(func(s *EngineStats) { s.Replayed++ })
		settled()
		return poll
	case errors.Is(err, idemkit.ErrInProgress):
		in.Kind = Busy
		c.r.add(c.id, in, ClaimOutput{}, call, ret)
		c.r.count(func(s *EngineStats) { s.Busy++ })
		return poll
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrCorrupt), errors.Is(err, idemkit.ErrMismatch):
		c.r.fail(fmt.Errorf("Begin(%s): %w", key, err))
		return w.Backoff
	case notSent(err):
		// The request never reached the store (see notSent).
		c.r.count(func(s *EngineStats) { s.NotSent++ })
		return w.Backoff
	default: // a store failure, a deadline: it may have claimed the key
		if err == nil {
			err = fmt.Errorf("linear: Begin returned no claim, replay or error (unguarded %v)", res.Unguarded)
		}
		in.Kind = BeginFailed
		c.r.add(c.id, in, ClaimOutput{}, call, ret)
		c.r.unknown(err)
		c.renew()
		return w.Backoff
	}

	lease := w.Lease
	var stall time.Duration
	switch {
	case w.Paused:
		stall = lease * time.Duration(c.rng.IntN(50)) / 100
	case !c.beat && c.rng.IntN(3) == 0:
		stall = lease + lease*time.Duration(30+c.rng.IntN(40))/100
	case c.beat && c.rng.IntN(10) == 0:
		stall = lease + lease/2
	default:
		stall = lease * time.Duration(c.rng.IntN(10)) / 100
	}
	admitted := time.Now()
	time.Sleep(stall) // the work, or a pause (GC, scheduler, SIGSTOP) past the lease
	var release bool
	switch {
	case w.Paused && time.Since(admitted) > lease: // paused past the lease
		c.r.count(func(s *EngineStats) { s.Stalls++ })
	case w.Paused:
		release = c.rng.IntN(20) != 0
	case stall > lease:
		c.r.count(func(s *EngineStats) { s.Stalls++ })
	default:
		release = c.rng.IntN(4) != 0
	}
	if release {
		ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
		claim.Release(ctx) // not recorded: see the package documentation
		cancel()
		return poll
	}

	ctx, cancel = context.WithTimeout(context.Background(), w.OpTimeout)
	defer cancel()
	in = ClaimInput{Kind: Complete, Key: key, Fence: in.Fence}
	var out ClaimOutput
	call = c.r.now()
	err = claim.Complete(ctx, []byte("v"))
	ret = c.r.now()
	switch {
	case err == nil:
		out.OK = true
		c.r.count(func(s *EngineStats) { s.Completed++ })
		settled()
	case errors.Is(err, idemkit.ErrLeaseLost) && !errors.Is(err, idemkit.ErrUnavailable):
		out.Lost = true
		c.r.count(func(s *EngineStats) { s.Lost++ })
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrCorrupt), errors.Is(err, idemkit.ErrResultTooLarge):
		c.r.fail(fmt.Errorf("Complete(%s, %d): %w", key, in.Fence, err))
		claim.Release(ctx)
		return w.Backoff
	default:
		out.Unknown = true
		c.r.unknown(err)
	}
	c.r.add(c.id, in, out, call, ret)
	if out.Unknown {
		rctx, rcancel := context.WithTimeout(context.Background(), w.OpTimeout)
		claim.Release(rctx)
		rcancel()
		c.renew()
		return w.Backoff
	}
	return poll
}

// stall returns how long a claim's work takes: past the lease for a third
// of the claims without a heartbeat and a tenth of those with one (for
// one and a half leases), otherwise under a tenth of it.
func (c *claimer) stall() time.Duration {
	lease := c.r.w.Lease
	switch {
	case !c.beat && c.rng.IntN(3) == 0:
		return lease + lease*time.Duration(30+c.rng.IntN(40))/100
	case c.beat && c.rng.IntN(10) == 0:
		return lease + lease/2
	}
	return lease * time.Duration(c.rng.IntN(10)) / 100
}

// do claims key once through Engine.Do and returns the pause before the
// next claim.
func (c *claimer) do(key string, opts []idemkit.Option, settled func(), poll time.Duration) time.Duration {
	w := c.r.w
	stall := c.stall()
	var fence uint64
	var ran bool
	var admitted, finished int64
	fn := func(ctx context.Context) ([]byte, error) {
		admitted = c.r.now()
		fence, ran = idemkit.FenceFromContext(ctx)
		if !ran {
			return nil, errors.New("linear: Do's fn got no fencing token")
		}
		time.Sleep(stall) // the work, or a pause past the lease
		finished = c.r.now()
		return []byte("v"), nil
	}
	// Do's deadline covers the work, and the store calls after it.
	ctx, cancel := context.WithTimeout(context.Background(), stall+w.OpTimeout)
	defer cancel()
	call := c.r.now()
	res, err := c.e.Do(ctx, key, "", fn, opts...)
	ret := c.r.now()
	if stall > w.Lease && ran {
		c.r.count(func(s *EngineStats) { s.Stalls++ })
	}
	if !ran {
		in := ClaimInput{Key: key}
		switch {
		case err == nil && res.Replayed:
			in.Kind = Replay
			c.r.add(c.id, in, ClaimOutput{}, call, ret)
			c.r.count(func(s *EngineStats) { s.Replayed++ })
			settled()
			return poll
		case errors.Is(err, idemkit.ErrInProgress):
			in.Kind = Busy
			c.r.add(c.id, in, ClaimOutput{}, call, ret)
			c.r.count(func(s *EngineStats) { s.Busy++ })
			return poll
		case err == nil, errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrCorrupt), errors.Is(err, idemkit.ErrMismatch):
			c.r.fail(fmt.Errorf("Do(%s) without running fn: %v, %+v", key, err, res))
			return w.Backoff
		case notSent(err):
			c.r.count(func(s *EngineStats) { s.NotSent++ })
			return w.Backoff
		}
		in.Kind = BeginFailed
		c.r.add(c.id, in, ClaimOutput{}, call, ret)
		c.r.unknown(err)
		c.renew()
		return w.Backoff
	}
	c.r.add(c.id, ClaimInput{Kind: Admit, Key: key, Fence: fence}, ClaimOutput{}, call, admitted)
	c.r.count(func(s *EngineStats) { s.Admitted++ })
	in := ClaimInput{Kind: Complete, Key: key, Fence: fence}
	var out ClaimOutput
	switch {
	case err == nil && !res.Replayed:
		out.OK = true
		c.r.count(func(s *EngineStats) { s.Completed++ })
		settled()
	case errors.Is(err, idemkit.ErrLeaseLost) && !errors.Is(err, idemkit.ErrUnavailable) && !c.beat:
		out.Lost = true
		c.r.count(func(s *EngineStats) { s.Lost++ })
	case errors.Is(err, idemkit.ErrLeaseLost) && !errors.Is(err, idemkit.ErrUnavailable):
		// With a heartbeat, Do also returns ErrLeaseLost when the
		// heartbeat could not confirm the lease in time (the store did not
		// answer): it then completes nothing, and the claim may still hold
		// the key. Neither changes the key; the model cannot tell them
		// apart, so the outcome is recorded as unknown.
		out.Unknown = true
		c.r.count(func(s *EngineStats) { s.Lost++ })
	case err == nil, errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrCorrupt), errors.Is(err, idemkit.ErrResultTooLarge):
		c.r.fail(fmt.Errorf("Do(%s, %d) after fn ran: %v, %+v", key, fence, err, res))
		return w.Backoff
	default:
		out.Unknown = true
		c.r.unknown(err)
	}
	c.r.add(c.id, in, out, finished, ret)
	if out.Unknown {
		c.renew()
		return w.Backoff
	}
	return poll
}
