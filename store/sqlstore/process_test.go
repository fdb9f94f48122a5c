package sqlstore_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// Shape of the cross-process race.
const (
	raceProcs      = 4  // OS processes
	raceGoroutines = 32 // goroutines per process
	raceKeys       = 64 // keys raced for with SetNX, and as many with Consume
	raceConns      = 12 // pooled connections per process
)

// TestCrossProcessRace runs raceProcs copies of this test binary, each
// with raceGoroutines goroutines, against one table. Every goroutine
// SetNXes every one of raceKeys keys, then Consumes every one of raceKeys
// keys the parent stored. Each child prints what it won; every key must
// have exactly one winner, and the value left under each SetNX key must be
// its winner's.
func TestCrossProcessRace(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := newStore(t, b)
			for i := range raceKeys {
				mustSet(t, s, "consume:"+strconv.Itoa(i), []byte("stored-"+strconv.Itoa(i)), time.Hour)
			}
			lines := runChildren(t, b, s.Table(), "TestRaceChild", nil, "SET ", "CONSUMED ")
			set, consumed := map[string]string{}, map[string]string{}
			for _, l := range lines {
				f := strings.Fields(l)
				if len(f) != 3 {
					t.Fatalf("child printed %q", l)
				}
				kind, key, who := f[0], f[1], f[2]
				wins := map[string]map[string]string{"SET": set, "CONSUMED": consumed}[kind]
				if wins == nil {
					t.Fatalf("child printed %q", l)
				}
				if prev, dup := wins[key]; dup {
					t.Fatalf("%s %s won twice: by %s and by %s", kind, key, prev, who)
				}
				wins[key] = who
			}
			if len(set) != raceKeys || len(consumed) != raceKeys {
				t.Fatalf("%d SetNX keys and %d Consume keys won, want %d of each", len(set), len(consumed), raceKeys)
			}
			for i := range raceKeys {
				k := "set:" + strconv.Itoa(i)
				mustHold(t, s, k, []byte(set[k]))
				if v := consumed["consume:"+strconv.Itoa(i)]; v != "stored-"+strconv.Itoa(i) {
					t.Errorf("Consume of consume:%d returned %q", i, v)
				}
			}
		})
	}
}

// runChildren starts raceProcs children running the test named child,
// with env added to their environment, releases them together (each waits
// for a line on stdin) and returns the lines they printed that start with
// one of prefixes.
func runChildren(t *testing.T, b *backend, table, child string, env []string, prefixes ...string) []string {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		lines []string
		cmds  []*exec.Cmd
	)
	starts := make([]func(), 0, raceProcs)
	for p := range raceProcs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
		cmd.Env = append(append(os.Environ(), env...), envChild+"=1", envChildDSN+"="+b.dsn, envChildTable+"="+table,
			envChildDialect+"="+b.name, envChildProc+"="+strconv.Itoa(p))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		ready := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				l := sc.Text()
				switch {
				case l == "READY":
					close(ready)
				case slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(l, p) }):
					mu.Lock()
					lines = append(lines, l)
					mu.Unlock()
				default:
					fmt.Fprintln(os.Stderr, "child:", l)
				}
			}
		}()
		select {
		case <-ready:
		case <-ctx.Done():
			t.Fatal("a child did not get ready")
		}
		starts = append(starts, func() { fmt.Fprintln(stdin, "GO"); stdin.Close() })
	}
	for _, start := range starts {
		start()
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	return lines
}

// Environment of a child process.
const (
	envChildDSN     = "SQLSTORE_TEST_DSN"
	envChildDialect = "SQLSTORE_TEST_DIALECT"
	envChildProc    = "SQLSTORE_TEST_PROC"
)

// TestRaceChild is the body of a child of TestCrossProcessRace; it is
// skipped in a normal run.
func TestRaceChild(t *testing.T) {
	if os.Getenv(envChild) == "" {
		t.Skip("run by TestCrossProcessRace")
	}
	driver, d := "pgx", sqlstore.Postgres
	if os.Getenv(envChildDialect) == "mysql" {
		driver, d = "mysql", sqlstore.MySQL
	}
	db, err := sql.Open(driver, os.Getenv(envChildDSN))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// 32 goroutines share 12 connections: 4 processes stay well within
	// PostgreSQL's default of 100 connections, shared with other tests.
	db.SetMaxOpenConns(raceConns)
	db.SetMaxIdleConns(raceConns)
	s, err := sqlstore.New(db, d, sqlstore.WithTable(os.Getenv(envChildTable)), sqlstore.WithoutSweeper())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("READY")
	bufio.NewReader(os.Stdin).ReadString('\n')
	proc := os.Getenv(envChildProc)
	var out sync.Mutex
	var wg sync.WaitGroup
	for g := range raceGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, _ := strconv.Atoi(proc)
			raceOne(t, s, proc+"/"+strconv.Itoa(g), n*raceGoroutines+g, &out)
		}()
	}
	wg.Wait()
}

// raceOne is one goroutine of a child: it claims and consumes every key,
// starting at a different key than its neighbours, and prints its wins.
func raceOne(t *testing.T, s store.Store, who string, off int, out *sync.Mutex) {
	ctx := t.Context()
	for j := range raceKeys {
		i := (j + off) % raceKeys
		set, _, err := s.SetNX(ctx, "set:"+strconv.Itoa(i), []byte(who), time.Hour)
		if err != nil {
			t.Error(err)
			return
		}
		if set {
			out.Lock()
			fmt.Println("SET", "set:"+strconv.Itoa(i), who)
			out.Unlock()
		}
	}
	for j := range raceKeys {
		i := (j + off) % raceKeys
		v, err := s.Consume(ctx, "consume:"+strconv.Itoa(i))
		if err == nil {
			out.Lock()
			fmt.Println("CONSUMED", "consume:"+strconv.Itoa(i), string(v))
			out.Unlock()
		} else if !errors.Is(err, store.ErrNotFound) {
			t.Error(err)
			return
		}
	}
}
