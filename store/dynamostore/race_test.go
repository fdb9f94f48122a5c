package dynamostore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClaimRace races 64 goroutines, each with its own client (its own
// connections), at one key, in several rounds: each round has exactly one
// winner, and every loser is told the winner's value.
func TestClaimRace(t *testing.T) {
	s, _ := newStore(t)
	const goroutines, rounds = 64, 5
	for round := range rounds {
		key := "race-" + strconv.Itoa(round)
		var wg sync.WaitGroup
		start := make(chan struct{})
		set := make([]bool, goroutines)
		seen := make([]string, goroutines)
		errs := make([]error, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				<-start
				ok, held, err := s.SetNX(context.Background(), key, []byte("g"+strconv.Itoa(g)), time.Minute)
				set[g], seen[g], errs[g] = ok, string(held.Value), err
			})
		}
		close(start)
		wg.Wait()
		winner := ""
		for g := range goroutines {
			require.NoError(t, errs[g])
			if set[g] {
				require.Empty(t, winner, "round %d: two winners", round)
				winner = "g" + strconv.Itoa(g)
			}
		}
		require.NotEmpty(t, winner, "round %d: no winner", round)
		for g := range goroutines {
			if !set[g] {
				require.Equal(t, winner, seen[g], "round %d: a loser saw another value", round)
			}
		}
	}
}
