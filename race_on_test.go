//go:build race

package idemkit_test

// raceEnabled reports a -race build, in which sync.Pool drops items at
// random, so allocation counts do not hold.
const raceEnabled = true
