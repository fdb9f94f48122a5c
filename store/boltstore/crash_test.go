//go:build unix

package boltstore_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store/boltstore"
)

// crashPathEnv names the variable that makes the test binary act as the
// crash test's child: it opens the store at that path and writes until it
// is killed.
const crashPathEnv = "BOLTSTORE_CRASH_CHILD_PATH"

// Bounds of the child, so that an orphaned child stops by itself.
const (
	crashWriters   = 8
	crashMaxPerJob = 20_000
	crashMaxTime   = time.Minute
)

func TestMain(m *testing.M) {
	if path := os.Getenv(crashPathEnv); path != "" {
		os.Exit(crashChild(path))
	}
	os.Exit(m.Run())
}

// crashChild runs SetNX on fresh keys from several goroutines and prints
// each key once its SetNX has returned success: every printed key has been
// acknowledged as durably stored.
func crashChild(path string) int {
	s, err := boltstore.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashMaxTime)
	defer cancel()
	var out sync.Mutex
	var wg sync.WaitGroup
	for g := range crashWriters {
		wg.Go(func() {
			for i := range crashMaxPerJob {
				key := fmt.Sprintf("w%d-%06d", g, i)
				set, _, err := s.SetNX(ctx, key, []byte(key), time.Hour)
				if err != nil || !set {
					fmt.Fprintln(os.Stderr, "child: setnx:", key, set, err)
					return
				}
				out.Lock()
				_, _ = os.Stdout.WriteString(key + "\n") // unbuffered: one write(2) per line
				out.Unlock()
			}
		})
	}
	wg.Wait()
	_ = s.Close()
	return 0
}

// TestCrashKeepsAcknowledgedWrites kills a writing child process with
// SIGKILL at a random point, then checks that the file is consistent and
// holds every key the child acknowledged.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crash.db")
			acked := runAndKill(t, path, 200+rand.IntN(1801))
			checkFile(t, path)
			checkAcked(t, path, acked)
			t.Logf("killed after %d acknowledged writes", len(acked))
		})
	}
}

// runAndKill starts the child on path, kills it with SIGKILL once it has
// acknowledged killAfter keys, and returns every key it acknowledged.
func runAndKill(t *testing.T, path string, killAfter int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashPathEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	var acked []string
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil { // EOF: the child died; a partial line was never acknowledged
			require.ErrorIs(t, err, io.EOF)
			break
		}
		acked = append(acked, strings.TrimSuffix(line, "\n"))
		if len(acked) == killAfter {
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		}
	}
	err = cmd.Wait()
	require.Error(t, err, "the child must have been killed; stderr: %s", stderr.String())
	require.GreaterOrEqual(t, len(acked), killAfter, "child stopped early; stderr: %s", stderr.String())
	return acked
}

// checkFile opens the file with raw bbolt and runs its consistency check.
func checkFile(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		return nil
	}))
}

// checkAcked reopens the store and requires every acknowledged key.
func checkAcked(t *testing.T, path string, acked []string) {
	t.Helper()
	s, err := boltstore.Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	for _, k := range acked {
		e, err := s.Get(ctxb, k)
		require.NoError(t, err, "acknowledged key %q lost", k)
		require.Equal(t, k, string(e.Value))
	}
	n, err := s.Len(ctxb)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, len(acked))
}
