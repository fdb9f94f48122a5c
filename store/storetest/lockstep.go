package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Lockstep race parameters. A race walks fresh keys one at a time: at
// least lockstepMinKeys keys, then more until lockstepMaxKeys keys or until
// lockstepBudget has passed. The budget only bounds the work done against
// a slow store; it never decides whether a test passes. Each key is
// checked and removed two keys later, so a race holds only a few keys.
const (
	lockstepMinKeys  = 64
	lockstepMaxKeys  = 4096
	lockstepBudget   = 500 * time.Millisecond
	spinsBeforeYield = 1 << 14
)

// lockstepCases race a few goroutines over many keys in lockstep. The
// 64-racer races start each contest with one release of many goroutines,
// of which only the first few to run can overlap, so on a fast in-process
// store they rarely catch an operation that reads and then writes in two
// steps. Here every key is a fresh contest whose racers leave a spinning
// barrier together, thousands of times, which does.
func lockstepCases() []testCase {
	return []testCase{
		{name: "Race/LockstepSetNX", f: testLockstepSetNX},
		{name: "Race/LockstepConsume", f: testLockstepConsume},
		{name: "Race/LockstepCompareAndSwap", f: testLockstepCAS},
		{name: "Race/LockstepCompareAndDelete", f: testLockstepCAD},
	}
}

// lockstepRacers is the number of goroutines in a lockstep race: one per
// processor, at least two and at most eight, so that they all run at once
// while they spin at the barrier.
func lockstepRacers() int {
	return min(max(2, runtime.GOMAXPROCS(0)), 8)
}

// lockstepRace is one lockstep race. Racer 0 calls prepare(key) before
// each key is raced (nil: nothing to prepare); every racer then calls
// op(i, key); settle(key, winner) checks the key's final state given its
// single winner and removes the key.
type lockstepRace struct {
	prefix  string
	prepare func(key string) error
	op      func(i int, key string) (bool, error)
	settle  func(key string, winner int) error
}

// lockstepState is the shared state of a running lockstep race.
type lockstepState struct {
	r       lockstepRace
	n       int // racers
	won     [][]bool
	errs    [][]error
	start   time.Time
	arrived atomic.Int64
	steps   atomic.Int64 // keys to race; racer 0 lowers it to stop
	err     error        // first failure, written by racer 0 only
}

// run races the racers over fresh keys, all waiting at a barrier before
// each key so that their calls on it start together, and returns the
// first failure.
func (r lockstepRace) run() error {
	st := &lockstepState{r: r, n: lockstepRacers(), start: time.Now()}
	st.won, st.errs = make([][]bool, lockstepMaxKeys), make([][]error, lockstepMaxKeys)
	for j := range st.won {
		st.won[j], st.errs[j] = make([]bool, st.n), make([]error, st.n)
	}
	st.steps.Store(lockstepMaxKeys)
	race(st.n, st.racer)
	if st.err != nil {
		return st.err
	}
	// The last two keys raced are not settled yet.
	steps := int(st.steps.Load())
	for j := max(0, steps-2); j < steps; j++ {
		if err := st.settle(j); err != nil {
			return err
		}
	}
	return nil
}

// racer is racer i's walk over the keys.
func (st *lockstepState) racer(i int) {
	for j := range lockstepMaxKeys {
		if i == 0 && !st.next(j) {
			st.steps.Store(int64(j))
		}
		st.arrived.Add(1)
		waitFor(&st.arrived, int64(st.n*(j+1)))
		// Racer 0 decides about key j before it arrives at the barrier of
		// key j, so every racer reads the same decision here; later it
		// can only lower steps to a key after j.
		if int64(j) >= st.steps.Load() {
			return
		}
		st.won[j][i], st.errs[j][i] = st.r.op(i, st.key(j))
	}
}

// next is racer 0's work before key j: decide whether to race key j; if
// so, settle key j-2 (every racer has finished it, having passed the
// barrier of key j-1) and prepare key j. It reports whether to race key j;
// when it does not, keys j-2 and j-1 are left for run to settle.
func (st *lockstepState) next(j int) bool {
	if j >= lockstepMinKeys && time.Since(st.start) > lockstepBudget {
		return false
	}
	if j >= 2 {
		if st.err = st.settle(j - 2); st.err != nil {
			return false
		}
	}
	if st.r.prepare != nil {
		st.err = st.r.prepare(st.key(j))
	}
	return st.err == nil
}

// key names the j-th key of the race.
func (st *lockstepState) key(j int) string {
	return st.r.prefix + ":" + strconv.Itoa(j)
}

// settle checks that key j had exactly one winner and no errors, and
// settles the key.
func (st *lockstepState) settle(j int) error {
	key := st.key(j)
	winner, err := winners(st.won[j], st.errs[j])
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return st.r.settle(key, winner)
}

// waitFor busy-waits until n reaches want, yielding the processor only
// after a while, so that waiters leave within moments of each other.
func waitFor(n *atomic.Int64, want int64) {
	for spins := 0; n.Load() < want; spins++ {
		if spins >= spinsBeforeYield {
			runtime.Gosched()
		}
	}
}

// presetV0 returns a prepare func storing "v0" under an absent key.
func presetV0(c *checker, s store.Store) func(key string) error {
	return func(key string) error {
		set, _, err := s.SetNX(c.ctx, key, []byte("v0"), longTTL)
		if err == nil && !set {
			err = fmt.Errorf("SetNX of fresh key %q did not set", key)
		}
		return err
	}
}

// removeIfHolds returns a settle func that requires key to hold the
// winner's value and then deletes it.
func removeIfHolds(c *checker, s store.Store) func(key string, winner int) error {
	return func(key string, winner int) error {
		e, err := s.Get(c.ctx, key)
		if err != nil {
			return fmt.Errorf("%s: Get after the race: %w", key, err)
		}
		if want := racerValue(winner); !bytes.Equal(e.Value, want) {
			return fmt.Errorf("%s holds %q, want the winner's %q", key, e.Value, want)
		}
		ok, err := s.CompareAndDelete(c.ctx, key, e.Value)
		if err == nil && !ok {
			err = fmt.Errorf("%s: CompareAndDelete of the value just read reported false", key)
		}
		return err
	}
}

// requireGone returns a settle func that requires key to be absent.
func requireGone(c *checker, s store.Store) func(key string, winner int) error {
	return func(key string, _ int) error {
		if _, err := s.Get(c.ctx, key); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%s after the race: Get = %v, want ErrNotFound", key, err)
		}
		return nil
	}
}

// lockstep runs r and reports its first failure as breaking rule.
func (c *checker) lockstep(r lockstepRace, rule, what string) {
	if err := r.run(); err != nil {
		c.errorf(rule, "%s from %d goroutines in lockstep: %v", what, lockstepRacers(), err)
	}
}

func testLockstepSetNX(c *checker, s store.Store) {
	c.lockstep(lockstepRace{prefix: "lsnx", settle: removeIfHolds(c, s), op: func(i int, key string) (bool, error) {
		set, _, err := s.SetNX(c.ctx, key, racerValue(i), longTTL)
		return set, err
	}}, ruleAtomic, "SetNX")
}

func testLockstepConsume(c *checker, s store.Store) {
	c.lockstep(lockstepRace{prefix: "lsconsume", prepare: presetV0(c, s), settle: requireGone(c, s), op: func(_ int, key string) (bool, error) {
		v, err := s.Consume(c.ctx, key)
		return consumeWon(v, err, "v0")
	}}, ruleConsume, "Consume")
}

func testLockstepCAS(c *checker, s store.Store) {
	c.lockstep(lockstepRace{prefix: "lscas", prepare: presetV0(c, s), settle: removeIfHolds(c, s), op: func(i int, key string) (bool, error) {
		return s.CompareAndSwap(c.ctx, key, []byte("v0"), racerValue(i), longTTL)
	}}, ruleAtomic, "CompareAndSwap")
}

func testLockstepCAD(c *checker, s store.Store) {
	c.lockstep(lockstepRace{prefix: "lscad", prepare: presetV0(c, s), settle: requireGone(c, s), op: func(_ int, key string) (bool, error) {
		return s.CompareAndDelete(c.ctx, key, []byte("v0"))
	}}, ruleAtomic, "CompareAndDelete")
}
