package dynamostore_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store/dynamostore"
)

// Shape of the cross-process race.
const (
	raceProcs      = 4  // OS processes
	raceGoroutines = 16 // goroutines per process
	raceKeys       = 20 // keys raced for
)

// TestCrossProcessRace runs raceProcs copies of this test binary, each
// racing raceGoroutines goroutines for the same raceKeys keys. Each child
// prints the keys it won; every key must have exactly one winner, whose
// value the key holds.
func TestCrossProcessRace(t *testing.T) {
	s, _ := newStore(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The children start racing together, once all have started.
	startAt := time.Now().Add(time.Second).UnixMilli()
	outs := make([]bytes.Buffer, raceProcs)
	var wg sync.WaitGroup
	errs := make([]error, raceProcs)
	for p := range raceProcs {
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %d", childEnv, endpoint, s.Table(), p, startAt))
		cmd.Stdout = &outs[p]
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		wg.Go(func() { errs[p] = cmd.Wait() })
	}
	wg.Wait()
	wins := map[string]string{}
	for p := range raceProcs {
		require.NoError(t, errs[p], "child %d", p)
		sc := bufio.NewScanner(&outs[p])
		for sc.Scan() {
			key, value, ok := strings.Cut(sc.Text(), " ")
			require.True(t, ok, "child %d printed %q", p, sc.Text())
			prev, dup := wins[key]
			require.False(t, dup, "%s won twice: by %s and by %s", key, prev, value)
			wins[key] = value
		}
	}
	require.Len(t, wins, raceKeys, "every key must have one winner")
	for key, value := range wins {
		e, err := s.Get(context.Background(), key)
		require.NoError(t, err)
		require.Equal(t, value, string(e.Value))
	}
}

// runChild is a child of TestCrossProcessRace: arg holds the endpoint,
// the table, the child's number and the Unix millisecond at which to
// start, the same for every child, so that the children, started one
// after another, race together. It prints "KEY VALUE" for each key it
// won.
func runChild(arg string) int {
	f := strings.Fields(arg)
	if len(f) != 4 {
		fmt.Fprintln(os.Stderr, "child: bad argument", arg)
		return 2
	}
	ctx := context.Background()
	client, _ := newClient(f[0])
	s, err := dynamostore.New(ctx, client, f[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	startAt, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	time.Sleep(time.Until(time.UnixMilli(startAt)))
	var mu sync.Mutex
	var wg sync.WaitGroup
	failed := false
	for g := range raceGoroutines {
		wg.Go(func() {
			for k := range raceKeys {
				key := "xp-" + strconv.Itoa(k)
				value := "p" + f[2] + "g" + strconv.Itoa(g)
				set, _, err := s.SetNX(ctx, key, []byte(value), time.Minute)
				mu.Lock()
				switch {
				case err != nil:
					fmt.Fprintln(os.Stderr, "child:", err)
					failed = true
				case set:
					fmt.Println(key, value)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed {
		return 1
	}
	return 0
}
