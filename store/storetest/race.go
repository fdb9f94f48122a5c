package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/idemkit/idemkit/store"
)

// Race parameters: racers goroutines hit one key at once, and each race is
// repeated rounds times on fresh keys.
const (
	racers = 64
	rounds = 20
)

// raceCases check atomicity by racing goroutines at one key and counting
// winners.
func raceCases() []testCase {
	return []testCase{
		{name: "Race/SetNXOneWinner", f: testRaceSetNX},
		{name: "Race/ConsumeOneWinner", f: testRaceConsume},
		{name: "Race/CompareAndSwapOneWinner", f: testRaceCAS},
		{name: "Race/CompareAndDeleteOneWinner", f: testRaceCAD},
		{name: "Race/ConsumeVersusCompareAndDelete", f: testRaceConsumeVsCAD},
		{name: "Race/SwapVersusDelete", f: testRaceSwapVsDelete},
		{name: "Race/StaleValueNeverWins", f: testStale},
		{name: "Race/CompareAndSwapCounter", f: testRaceCounter},
	}
}

// race runs f(i) for i in [0, n) on n goroutines released together, and
// waits for all of them.
func race(n int, f func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// roundKey names the key of one race round.
func roundKey(prefix string, round int) string {
	return prefix + ":" + strconv.Itoa(round)
}

// racerValue is the distinct value racer i writes.
func racerValue(i int) []byte {
	return []byte("racer-" + strconv.Itoa(i))
}

// winners checks one race's outcome: no racer failed and exactly one won.
// It returns the winner's index, or -1 after reporting what went wrong.
func winners(won []bool, errs []error) (winner int, err error) {
	winner, n := -1, 0
	for i, w := range won {
		if errs[i] != nil {
			return -1, fmt.Errorf("racer %d failed: %w", i, errs[i])
		}
		if w {
			winner, n = i, n+1
		}
	}
	switch {
	case n == 0:
		return -1, errors.New("no racer won")
	case n > 1:
		return -1, fmt.Errorf("%d of %d racers won", n, len(won))
	}
	return winner, nil
}

// oneWinner reports unless exactly one racer won and none failed, citing
// rule for a wrong number of winners, and returns the winner (-1 if the
// check failed).
func (c *checker) oneWinner(won []bool, errs []error, rule, what string) int {
	for i, err := range errs {
		if err != nil {
			c.errorf(ruleConcurrent, "%s: racer %d failed: %v", what, i, err)
			return -1
		}
	}
	w, err := winners(won, errs)
	if err != nil {
		c.errorf(rule, "%s: %v", what, err)
	}
	return w
}

func testRaceSetNX(c *checker, s store.Store) {
	for r := range rounds {
		key := roundKey("nx", r)
		won, errs := make([]bool, racers), make([]error, racers)
		seen := make([]store.Entry, racers)
		race(racers, func(i int) {
			won[i], seen[i], errs[i] = s.SetNX(c.ctx, key, racerValue(i), longTTL)
		})
		w := c.oneWinner(won, errs, ruleAtomic, "SetNX("+strconv.Quote(key)+") from "+strconv.Itoa(racers)+" goroutines")
		if w < 0 || !c.loserSaw(seen, w) {
			return
		}
		if _, ok := c.holds(s, key, racerValue(w), ruleAtomic); !ok {
			return
		}
	}
}

// loserSaw checks that every loser of a SetNX race was shown the winner's
// value and a valid TTL.
func (c *checker) loserSaw(seen []store.Entry, w int) bool {
	for i, e := range seen {
		if i == w {
			continue
		}
		call := "losing SetNX of racer " + strconv.Itoa(i)
		if !c.expect(string(e.Value) == string(racerValue(w)), ruleSetNX, "%s returned existing value %q, want the winner's %q",
			call, e.Value, racerValue(w)) || !c.validTTL(e.TTL, call) {
			return false
		}
	}
	return true
}

// consumeWon reports whether a Consume of a key holding want won it.
func consumeWon(v []byte, err error, want string) (bool, error) {
	switch {
	case err == nil && string(v) == want:
		return true, nil
	case err == nil:
		return false, fmt.Errorf("Consume returned %q, want %q", v, want)
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	}
	return false, err
}

func testRaceConsume(c *checker, s store.Store) {
	raceFromV0(c, s, "Consume", ruleConsume, func(_ int, key string) (bool, error) {
		v, err := s.Consume(c.ctx, key)
		return consumeWon(v, err, "v0")
	}, func(key string, _ int) bool { return c.absent(s, key, ruleConsume) })
}

// raceFromV0 runs rounds of racers over fresh keys that each start as "v0":
// op is racer i's attempt on key, which must have exactly one winner (rule
// is cited otherwise), and check verifies the key's final state given that
// winner. It stops at the first round that fails.
func raceFromV0(c *checker, s store.Store, name, rule string, op func(i int, key string) (bool, error), check func(key string, winner int) bool) {
	for r := range rounds {
		key := roundKey(name, r)
		if !c.set(s, key, []byte("v0"), longTTL) {
			return
		}
		won, errs := make([]bool, racers), make([]error, racers)
		race(racers, func(i int) { won[i], errs[i] = op(i, key) })
		w := c.oneWinner(won, errs, rule, name+"("+strconv.Quote(key)+") from "+strconv.Itoa(racers)+" goroutines")
		if w < 0 || !check(key, w) {
			return
		}
	}
}

func testRaceCAS(c *checker, s store.Store) {
	raceFromV0(c, s, "CompareAndSwap", ruleAtomic, func(i int, key string) (bool, error) {
		return s.CompareAndSwap(c.ctx, key, []byte("v0"), racerValue(i), longTTL)
	}, func(key string, w int) bool {
		_, ok := c.holds(s, key, racerValue(w), ruleAtomic)
		return ok
	})
}

func testRaceCAD(c *checker, s store.Store) {
	raceFromV0(c, s, "CompareAndDelete", ruleAtomic, func(_ int, key string) (bool, error) {
		return s.CompareAndDelete(c.ctx, key, []byte("v0"))
	}, func(key string, _ int) bool { return c.absent(s, key, ruleAtomic) })
}

// testRaceConsumeVsCAD races Consume against CompareAndDelete: both
// remove the key, so exactly one racer of either kind wins.
func testRaceConsumeVsCAD(c *checker, s store.Store) {
	raceFromV0(c, s, "Consume/CompareAndDelete", ruleConsume, func(i int, key string) (bool, error) {
		if i%2 == 0 {
			return s.CompareAndDelete(c.ctx, key, []byte("v0"))
		}
		v, err := s.Consume(c.ctx, key)
		return consumeWon(v, err, "v0")
	}, func(key string, _ int) bool { return c.absent(s, key, ruleAtomic) })
}

// testRaceSwapVsDelete races CompareAndSwap against CompareAndDelete
// from the same old value: once one has won, the others hold a stale
// value, so exactly one racer of either kind wins.
func testRaceSwapVsDelete(c *checker, s store.Store) {
	raceFromV0(c, s, "CompareAndSwap/CompareAndDelete", ruleAtomic, func(i int, key string) (bool, error) {
		if i%2 == 0 {
			return s.CompareAndDelete(c.ctx, key, []byte("v0"))
		}
		return s.CompareAndSwap(c.ctx, key, []byte("v0"), racerValue(i), longTTL)
	}, func(key string, w int) bool {
		if w%2 == 0 {
			return c.absent(s, key, ruleAtomic)
		}
		_, ok := c.holds(s, key, racerValue(w), ruleAtomic)
		return ok
	})
}

// testStale checks sequentially that a value another writer replaced no
// longer matches.
func testStale(c *checker, s store.Store) {
	if !c.set(s, "k", []byte("A"), longTTL) || !c.swap(s, "k", []byte("A"), []byte("B"), longTTL) {
		return
	}
	ok, err := s.CompareAndDelete(c.ctx, "k", []byte("A"))
	c.noError(err, ruleCAD, "CompareAndDelete")
	c.expect(!ok, ruleCAD, `CompareAndDelete("k", "A") of a key holding "B" reported true`)
	ok, err = s.CompareAndSwap(c.ctx, "k", []byte("A"), []byte("C"), longTTL)
	c.noError(err, ruleCAS, "CompareAndSwap")
	c.expect(!ok, ruleCAS, `CompareAndSwap("k", "A", "C") of a key holding "B" reported true`)
	c.holds(s, "k", []byte("B"), ruleCAS)
}

// testRaceCounter increments a counter with read-then-CompareAndSwap loops
// from many goroutines: a CompareAndSwap that accepted a stale value would
// lose an increment, and one that refused the value it was given would
// make a loop retry; increment bounds the retries, so such a store fails
// the case instead of hanging it.
func testRaceCounter(c *checker, s store.Store) {
	const workers, increments = 8, 25
	if !c.set(s, "counter", []byte("0"), longTTL) {
		return
	}
	errs := make([]error, workers)
	race(workers, func(i int) {
		for range increments {
			if errs[i] = increment(c, s, "counter", workers*increments); errs[i] != nil {
				return
			}
		}
	})
	failed := 0
	var first error
	for _, err := range errs {
		if err != nil {
			failed++
			first = cmp.Or(first, err)
		}
	}
	if first != nil {
		rule := ruleConcurrent
		if errors.Is(first, errNoProgress) {
			rule = ruleCAS
		}
		c.errorf(rule, "incrementing a counter with Get and CompareAndSwap from %d goroutines, %d failed; the first: %v",
			workers, failed, first)
		return
	}
	c.holds(s, "counter", []byte(strconv.Itoa(workers*increments)), ruleAtomic)
}

// errNoProgress marks an increment that CompareAndSwap kept refusing.
var errNoProgress = errors.New("no progress")

// increment adds one to the decimal counter under key, retrying while its
// CompareAndSwap loses to another increment. With a correct store each
// refusal means another increment happened since this attempt's Get, so
// the next Get reads a larger value; the counter stays below total until
// this increment lands, so more than total attempts prove the store
// refused a key holding old: that returns an error wrapping
// errNoProgress.
func increment(c *checker, s store.Store, key string, total int) error {
	var old, next []byte
	for range total + 1 {
		e, err := s.Get(c.ctx, key)
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(string(e.Value))
		if err != nil {
			return err
		}
		old, next = e.Value, []byte(strconv.Itoa(n+1))
		ok, err := s.CompareAndSwap(c.ctx, key, old, next, longTTL)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: CompareAndSwap(%s, old %s, new %s) reported false %d times in a row, each right after Get read old, "+
		"but a correct store refuses only when another increment came between, and only %d exist",
		errNoProgress, show(key), show(old), show(next), total+1, total)
}
