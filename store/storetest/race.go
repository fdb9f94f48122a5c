package storetest

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

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
		{"Race/SetNXOneWinner", testRaceSetNX},
		{"Race/ConsumeOneWinner", testRaceConsume},
		{"Race/CompareAndSwapOneWinner", testRaceCAS},
		{"Race/CompareAndDeleteOneWinner", testRaceCAD},
		{"Race/ConsumeVersusCompareAndDelete", testRaceConsumeVsCAD},
		{"Race/SwapVersusDelete", testRaceSwapVsDelete},
		{"Race/StaleValueNeverWins", testStale},
		{"Race/CompareAndSwapCounter", testRaceCounter},
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

// onlyWinner returns the index of the single true in won, failing the test
// unless exactly one is true.
func onlyWinner(t *testing.T, won []bool, errs []error, what string) int {
	t.Helper()
	winner := -1
	for i, w := range won {
		require.NoError(t, errs[i], "%s racer %d", what, i)
		if w {
			require.Equal(t, -1, winner, "%s: racers %d and %d both won", what, winner, i)
			winner = i
		}
	}
	require.NotEqual(t, -1, winner, "%s: no racer won", what)
	return winner
}

func testRaceSetNX(t *testing.T, s store.Store) {
	for r := range rounds {
		key := roundKey("nx", r)
		won, errs := make([]bool, racers), make([]error, racers)
		seen := make([]store.Entry, racers)
		race(racers, func(i int) {
			won[i], seen[i], errs[i] = s.SetNX(ctxb, key, racerValue(i), longTTL)
		})
		w := onlyWinner(t, won, errs, "SetNX")
		for i := range racers {
			if i != w {
				require.Equal(t, racerValue(w), seen[i].Value, "loser %d saw another value than the winner's", i)
				requireValidTTL(t, seen[i].TTL)
			}
		}
		requireValue(t, s, key, racerValue(w))
	}
}

func testRaceConsume(t *testing.T, s store.Store) {
	for r := range rounds {
		key := roundKey("consume", r)
		mustSet(t, s, key, []byte("token"), longTTL)
		won, errs := make([]bool, racers), make([]error, racers)
		race(racers, func(i int) {
			v, err := s.Consume(ctxb, key)
			switch {
			case err == nil && string(v) == "token":
				won[i] = true
			case err == nil:
				errs[i] = errUnexpected("Consume returned " + strconv.Quote(string(v)))
			case !isNotFound(err):
				errs[i] = err
			}
		})
		onlyWinner(t, won, errs, "Consume")
		requireAbsent(t, s, key)
	}
}

// raceFromV0 runs rounds of racers over fresh keys that each start as "v0":
// op is racer i's attempt on key, which must have exactly one winner, and
// check verifies the key's final state given that winner.
func raceFromV0(t *testing.T, s store.Store, name string, op func(i int, key string) (bool, error), check func(key string, winner int)) {
	t.Helper()
	for r := range rounds {
		key := roundKey(name, r)
		mustSet(t, s, key, []byte("v0"), longTTL)
		won, errs := make([]bool, racers), make([]error, racers)
		race(racers, func(i int) { won[i], errs[i] = op(i, key) })
		check(key, onlyWinner(t, won, errs, name))
	}
}

func testRaceCAS(t *testing.T, s store.Store) {
	raceFromV0(t, s, "CompareAndSwap", func(i int, key string) (bool, error) {
		return s.CompareAndSwap(ctxb, key, []byte("v0"), racerValue(i), longTTL)
	}, func(key string, w int) { requireValue(t, s, key, racerValue(w)) })
}

func testRaceCAD(t *testing.T, s store.Store) {
	raceFromV0(t, s, "CompareAndDelete", func(_ int, key string) (bool, error) {
		return s.CompareAndDelete(ctxb, key, []byte("v0"))
	}, func(key string, _ int) { requireAbsent(t, s, key) })
}

// testRaceConsumeVsCAD races Consume against CompareAndDelete: both
// remove the key, so exactly one racer of either kind wins.
func testRaceConsumeVsCAD(t *testing.T, s store.Store) {
	raceFromV0(t, s, "Consume/CompareAndDelete", func(i int, key string) (bool, error) {
		if i%2 == 0 {
			return s.CompareAndDelete(ctxb, key, []byte("v0"))
		}
		v, err := s.Consume(ctxb, key)
		if isNotFound(err) {
			return false, nil
		}
		return err == nil && string(v) == "v0", err
	}, func(key string, _ int) { requireAbsent(t, s, key) })
}

// testRaceSwapVsDelete races CompareAndSwap against CompareAndDelete
// from the same old value: once one has won, the others hold a stale
// value, so exactly one racer of either kind wins.
func testRaceSwapVsDelete(t *testing.T, s store.Store) {
	raceFromV0(t, s, "CompareAndSwap/CompareAndDelete", func(i int, key string) (bool, error) {
		if i%2 == 0 {
			return s.CompareAndDelete(ctxb, key, []byte("v0"))
		}
		return s.CompareAndSwap(ctxb, key, []byte("v0"), racerValue(i), longTTL)
	}, func(key string, w int) {
		if w%2 == 0 {
			requireAbsent(t, s, key)
		} else {
			requireValue(t, s, key, racerValue(w))
		}
	})
}

// testStale checks sequentially that a value another writer replaced no
// longer matches.
func testStale(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte("A"), longTTL)
	swap(t, s, "k", []byte("A"), []byte("B"), longTTL)
	ok, err := s.CompareAndDelete(ctxb, "k", []byte("A"))
	require.NoError(t, err)
	require.False(t, ok, "CompareAndDelete with a replaced value")
	ok, err = s.CompareAndSwap(ctxb, "k", []byte("A"), []byte("C"), longTTL)
	require.NoError(t, err)
	require.False(t, ok, "CompareAndSwap with a replaced value")
	requireValue(t, s, "k", []byte("B"))
}

// testRaceCounter increments a counter with read-then-CompareAndSwap loops
// from many goroutines: a CompareAndSwap that accepted a stale value would
// lose an increment.
func testRaceCounter(t *testing.T, s store.Store) {
	const workers, increments = 8, 25
	mustSet(t, s, "counter", []byte("0"), longTTL)
	errs := make([]error, workers)
	race(workers, func(i int) {
		for range increments {
			if errs[i] = increment(s, "counter"); errs[i] != nil {
				return
			}
		}
	})
	for i, err := range errs {
		require.NoError(t, err, "worker %d", i)
	}
	requireValue(t, s, "counter", []byte(strconv.Itoa(workers*increments)))
}

// increment adds one to the decimal counter under key, retrying until its
// CompareAndSwap wins.
func increment(s store.Store, key string) error {
	for {
		e, err := s.Get(ctxb, key)
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(string(e.Value))
		if err != nil {
			return err
		}
		ok, err := s.CompareAndSwap(ctxb, key, e.Value, []byte(strconv.Itoa(n+1)), longTTL)
		if err != nil || ok {
			return err
		}
	}
}

// isNotFound reports whether err wraps store.ErrNotFound.
func isNotFound(err error) bool {
	return errors.Is(err, store.ErrNotFound)
}

// errUnexpected reports an outcome the contract rules out.
func errUnexpected(msg string) error {
	return errors.New("storetest: unexpected outcome: " + msg)
}
