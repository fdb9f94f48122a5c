package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// Shape of the cross-process race.
const (
	raceProcs      = 4   // OS processes
	raceGoroutines = 32  // goroutines per process
	raceKeys       = 200 // keys raced for with SetNX, and as many with Consume
	racePrefix     = "xp:"
)

// Environment of a child process of TestCrossProcessRace.
const (
	envAddr = "REDISSTORE_TEST_ADDR"
	envProc = "REDISSTORE_TEST_PROC"
)

// TestCrossProcessRace runs raceProcs copies of this test binary, each
// with raceGoroutines goroutines, against one Redis. All of them SetNX
// the same raceKeys keys, then Consume another raceKeys keys the parent
// stored. Each child prints what it won; every key must have exactly one
// winner, and the value left under each SetNX key must be its winner's.
func TestCrossProcessRace(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	s, err := redisstore.New(client, redisstore.WithPrefix(racePrefix))
	require.NoError(t, err)
	for i := range raceKeys {
		mustSetNX(t, s, consumeKey(i), "stored-"+strconv.Itoa(i))
	}

	lines := runChildren(t, srv.Addr())

	setWins, consumed := map[string]string{}, map[string]string{}
	for _, l := range lines {
		kind, key, value := parseLine(t, l)
		wins := map[string]map[string]string{"SET": setWins, "CONSUMED": consumed}[kind]
		require.NotNil(t, wins, "unexpected line %q", l)
		prev, dup := wins[key]
		require.False(t, dup, "%s %s won twice: by %s and by %s", kind, key, prev, value)
		wins[key] = value
	}
	require.Len(t, setWins, raceKeys, "every SetNX key must have a winner")
	require.Len(t, consumed, raceKeys, "every Consume key must have a winner")
	for i := range raceKeys {
		e, err := s.Get(ctxb, setKey(i))
		require.NoError(t, err)
		require.Equal(t, setWins[setKey(i)], string(e.Value), "the stored value must be the winner's")
		require.Equal(t, "stored-"+strconv.Itoa(i), consumed[consumeKey(i)])
	}
}

// runChildren starts the children, releases them together and returns
// the lines they printed.
func runChildren(t *testing.T, addr string) []string {
	ctx, cancel := context.WithTimeout(ctxb, 90*time.Second)
	defer cancel()
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   strings.Builder
	}
	children := make([]*child, raceProcs)
	for p := range children {
		c := &child{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")}
		c.cmd.Env = append(os.Environ(), helperEnv+"=1", envAddr+"="+addr, envProc+"="+strconv.Itoa(p))
		c.cmd.Stdout = &c.out
		c.cmd.Stderr = os.Stderr
		stdin, err := c.cmd.StdinPipe()
		require.NoError(t, err)
		c.stdin = stdin
		require.NoError(t, c.cmd.Start())
		children[p] = c
	}
	for _, c := range children {
		_, _ = io.WriteString(c.stdin, "go\n")
		_ = c.stdin.Close()
	}
	var lines []string
	for p, c := range children {
		require.NoError(t, c.cmd.Wait(), "child %d:\n%s", p, c.out.String())
		for l := range strings.Lines(c.out.String()) {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "SET ") || strings.HasPrefix(l, "CONSUMED ") {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// parseLine splits a child's "KIND key value" line.
func parseLine(t *testing.T, l string) (kind, key, value string) {
	f := strings.Fields(l)
	require.Len(t, f, 3, "malformed line %q", l)
	return f[0], f[1], f[2]
}

func setKey(i int) string     { return "s:" + strconv.Itoa(i) }
func consumeKey(i int) string { return "c:" + strconv.Itoa(i) }

// TestHelperProcess is the child side of TestCrossProcessRace. Run
// directly, without the child's environment, it does nothing.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		return
	}
	client := redis.NewClient(&redis.Options{Addr: os.Getenv(envAddr), PoolSize: raceGoroutines})
	defer client.Close()
	s, err := redisstore.New(client, redisstore.WithPrefix(racePrefix))
	require.NoError(t, err)
	require.NoError(t, s.LoadScripts(ctxb))
	// Wait for the parent's signal, so that all children start together.
	_, err = bufio.NewReader(os.Stdin).ReadString('\n')
	require.NoError(t, err)

	out := &lockedWriter{w: bufio.NewWriter(os.Stdout)}
	var wg sync.WaitGroup
	errs := make(chan error, raceGoroutines)
	for g := range raceGoroutines {
		me := fmt.Sprintf("p%sg%d", os.Getenv(envProc), g)
		wg.Go(func() { errs <- raceAll(s, me, out) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, out.flush())
}

// raceAll SetNXes every SetNX key with value me, then Consumes every
// Consume key, printing each win.
func raceAll(s *redisstore.Store, me string, out *lockedWriter) error {
	for i := range raceKeys {
		set, _, err := s.SetNX(ctxb, setKey(i), []byte(me), time.Minute)
		if err != nil {
			return err
		}
		if set {
			out.printf("SET %s %s\n", setKey(i), me)
		}
	}
	for i := range raceKeys {
		v, err := s.Consume(ctxb, consumeKey(i))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		out.printf("CONSUMED %s %s\n", consumeKey(i), v)
	}
	return nil
}

// lockedWriter serialises the children's output lines.
type lockedWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}

func (l *lockedWriter) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Flush()
}
