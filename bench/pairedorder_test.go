package bench

import (
	"slices"
	"testing"
)

// pairedOrder returns the order in which round round of a paired loop
// sends its requests to n targets, as indices: the rows of a Williams
// design, a Latin square in which every target is sent right after every
// other one equally often (once in n rounds for an even n, twice in 2n
// for an odd n, whose rows are also taken reversed), and sits in every
// position equally often. A rotation of one fixed order would make each
// target always follow the same one.
func pairedOrder(round, n int) []int {
	shift, reverse := round%n, n%2 == 1 && round/n%2 == 1
	order := make([]int, n)
	for k := range order {
		// The first row is 0, 1, n-1, 2, n-2, 3, ...
		v := (k + 1) / 2
		if k%2 == 0 && k > 0 {
			v = n - k/2
		}
		order[k] = (v + shift) % n
	}
	if reverse {
		slices.Reverse(order)
	}
	return order
}

// TestPairedOrderBalanced checks that over the rounds of a paired loop every
// target is sent right after every other target equally often, and sits in
// every position equally often. A latency depends on the request before it
// (on a machine whose idle CPUs halt, on which threads that request left
// awake), so a loop where each target always follows the same one measures
// that pairing, not the target.
func TestPairedOrderBalanced(t *testing.T) {
	for n := 2; n <= 9; n++ {
		rounds := 2 * n * 10
		after := make([][]int, n) // after[a][b]: times b was sent right after a in a round
		at := make([][]int, n)    // at[i][p]: times i was sent in position p
		for i := range n {
			after[i], at[i] = make([]int, n), make([]int, n)
		}
		for r := range rounds {
			order := pairedOrder(r, n)
			seen := make([]bool, n)
			for p, i := range order {
				if i < 0 || i >= n || seen[i] {
					t.Fatalf("n=%d round %d: order %v is not a permutation", n, r, order)
				}
				seen[i] = true
				at[i][p]++
				if p > 0 {
					after[order[p-1]][i]++
				}
			}
		}
		for a := range n {
			for b := range n {
				if a == b {
					continue
				}
				if want := rounds / n; after[a][b] != want {
					t.Errorf("n=%d: target %d sent right after %d in %d of %d rounds, want %d", n, b, a, after[a][b], rounds, want)
				}
			}
			for p := range n {
				if want := rounds / n; at[a][p] != want {
					t.Errorf("n=%d: target %d in position %d in %d of %d rounds, want %d", n, a, p, at[a][p], rounds, want)
				}
			}
		}
	}
}
