package linear_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemkit/idemkit/internal/linear"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// engineWork is the engine workload of the short version: 6 clients over
// 2 engines on 2 key slots, a lease of 100ms.
var engineWork = linear.EngineWorkload{
	Clients: 6, Engines: 2, Keys: 2, Duration: 2 * time.Second, Lease: 100 * time.Millisecond,
	OpTimeout: 500 * time.Millisecond, Backoff: 50 * time.Millisecond,
}

// runEngineCase records histories of the engine's claims over s under f
// and checks each against linear.EngineModel: one history in the short
// version, histories of 5 seconds for the time IDEMKIT_LINEAR_LONG names
// in the long one.
//
// With do set the claims go through Engine.Do (EngineWorkload.Do).
func runEngineCase(t *testing.T, storeName string, s store.Store, f fault, do ...bool) {
	p := planFor(t)
	count, w := 1, engineWork
	if p.budget > 0 {
		count, w.Duration, w.Clients, w.Keys = 1<<30, 5*time.Second, 8, 3
	}
	w.Do = len(do) > 0 && do[0]
	if w.Do {
		storeName += "-do"
	}
	start := time.Now()
	var total linear.EngineStats
	histories, injected := 0, 0
	for h := 0; h < count && (p.budget == 0 || time.Since(start) < p.budget); h++ {
		w.Prefix = fmt.Sprintf("eng:%s:%s:%s:%d:", runID, storeName, f.name, h)
		w.Seed = rand.Uint64()
		var ops []porcupine.Operation
		var stats linear.EngineStats
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			ops, stats, err = linear.RunEngine(s, w)
		}()
		injected += nemesis(t, f, done)
		if err != nil {
			t.Errorf("history %d: %v", h, err)
		}
		if linear.CheckModelT(t, linear.EngineModel, ops, fmt.Sprintf("engine-%s-%s-%d", storeName, f.name, h)) == porcupine.Illegal {
			for _, key := range linear.IllegalKeys(linear.EngineModel, ops) {
				t.Logf("key %s is not linearizable; its observations, ms from the history's start:\n%s", key, linear.Describe(linear.EngineModel, ops, key, 0))
			}
		}
		histories++
		total.Add(stats)
	}
	t.Logf("RESULT engine store=%s fault=%s histories=%d ops=%d keys=%d admitted=%d completed=%d leaselost=%d busy=%d replayed=%d stalls=%d unknown=%d faults=%d linearizable=%v time=%v",
		storeName, f.name, histories, total.Ops, total.Keys, total.Admitted, total.Completed, total.Lost, total.Busy, total.Replayed, total.Stalls, total.Unknown, injected, !t.Failed(), time.Since(start).Round(time.Millisecond))
	for _, e := range total.Errors {
		t.Logf("unknown outcome, e.g.: %s", e)
	}
	if total.Lost == 0 && f.inject == nil {
		t.Errorf("no Complete returned ErrLeaseLost: no key was taken over from a stalled owner, the run checked little")
	}
}

// engineFaults are the faults the engine check runs under on a networked
// store: a subset of proxyFaults, to keep the short version short.
func engineFaults(p *linear.Proxy) []fault {
	var fs []fault
	for _, f := range proxyFaults(p) {
		if f.name == "reset" || f.name == "lost-replies" {
			fs = append(fs, f)
		}
	}
	return append([]fault{noFault}, fs...)
}

// longOnly skips t in the short version, to keep it short.
func longOnly(t *testing.T) {
	if planFor(t).budget == 0 {
		t.Skipf("long version only (%s)", longEnv)
	}
}

func TestEngineMemstore(t *testing.T) {
	t.Parallel() // its own server or data: runs beside the other parallel cases
	s, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Run("begin", func(t *testing.T) { runEngineCase(t, "memstore", s, noFault) })
	t.Run("do", func(t *testing.T) { runEngineCase(t, "memstore", s, noFault, true) })
}

func TestEngineRedisstore(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
	p := newProxy(t, srv.Addr())
	s := newRedisStore(t, p.Addr())
	for _, f := range engineFaults(p) {
		t.Run(f.name, func(t *testing.T) { runEngineCase(t, "redisstore", s, f) })
	}
	// The restart is seen directly, as in TestRedisstore.
	direct := newRedisStore(t, srv.Addr())
	restart := fault{name: "restart", inject: func(*testing.T) { srv.Stop() }, heal: func(*testing.T) { srv.Restart() }}
	t.Run("restart", func(t *testing.T) { runEngineCase(t, "redisstore", direct, restart) })
	t.Run("do-restart", func(t *testing.T) { longOnly(t); runEngineCase(t, "redisstore", direct, restart, true) })
	for _, f := range engineFaults(p) {
		t.Run("do-"+f.name, func(t *testing.T) { longOnly(t); runEngineCase(t, "redisstore", s, f, true) })
	}
}

// engineSQL runs the engine cases over c: without faults, with the
// sessions killed, and with the proxy's resets and lost replies; the
// short version runs those short names.
func engineSQL(t *testing.T, c *sqlCase, short ...string) {
	stmts, err := sqlstore.Schema(c.dialect, "idem")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stmts {
		if _, err := c.db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	s, err := sqlstore.New(c.db, c.dialect, sqlstore.WithTable("idem"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	kill := fault{name: "kill", inject: c.kill, heal: func(*testing.T) {}}
	for _, f := range append(engineFaults(c.proxy), kill) {
		for _, do := range []bool{false, true} {
			name := f.name
			if do {
				name = "do-" + name
			}
			t.Run(name, func(t *testing.T) {
				if !slices.Contains(short, name) {
					longOnly(t)
				}
				runEngineCase(t, c.name, s, f, do)
			})
		}
	}
}

func TestEnginePostgres(t *testing.T) {
	t.Parallel() // its own server or data: runs beside the other parallel cases
	c := setupPostgres(t, fmt.Sprintf("idemkit_linear_eng_%d_%s", os.Getpid(), randHex(4)))
	engineSQL(t, c, "none", "reset", "lost-replies")
}

func TestEngineMariaDB(t *testing.T) {
	t.Parallel() // its own server or data: runs beside the other parallel cases
	c := setupMariaDB(t, fmt.Sprintf("idemkit_linear_eng_%d_%s", os.Getpid(), randHex(4)))
	engineSQL(t, c, "kill", "do-kill")
}

// TestEngineBoltKilled runs the engine's claims, through Begin and
// through Do, over the bbolt file of a child process that the nemesis
// kills with SIGKILL and restarts.
func TestEngineBoltKilled(t *testing.T) {
	t.Parallel() // its own server or data: runs beside the other parallel cases
	b := startBoltProc(t)
	kill := fault{name: "sigkill", inject: func(*testing.T) { b.kill() }, heal: func(t *testing.T) { b.start(t) }}
	t.Run("sigkill", func(t *testing.T) { runEngineCase(t, "boltstore-process", b, kill) })
	t.Run("do-sigkill", func(t *testing.T) { runEngineCase(t, "boltstore-process", b, kill, true) })
}

// blindSwap is a store whose CompareAndSwap ignores the compared value:
// it writes whenever the key is present, as a store whose swap is a GET
// then a SET without a transaction would when callers race.
type blindSwap struct{ store.Store }

func (s blindSwap) CompareAndSwap(ctx context.Context, key string, _, v []byte, ttl time.Duration) (bool, error) {
	ent, err := s.Store.Get(ctx, key)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return s.Store.CompareAndSwap(ctx, key, ent.Value, v, ttl)
}

// TestEngineCheckerFindsBlindSwap runs the engine's claims over a store
// whose CompareAndSwap ignores the compared value: a stalled owner's
// Complete then overwrites the claim that took the key over, and the
// checker must call the history illegal.
func TestEngineCheckerFindsBlindSwap(t *testing.T) {
	t.Parallel() // its own server or data: runs beside the other parallel cases
	base, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = base.Close() })
	var res porcupine.CheckResult
	var path string
	for h := 0; h < 3 && res != porcupine.Illegal; h++ {
		w := engineWork
		w.Prefix, w.Seed = fmt.Sprintf("blind%d:", h), uint64(h)
		ops, _, err := linear.RunEngine(blindSwap{base}, w)
		if err != nil {
			t.Fatal(err)
		}
		if res, path, err = linear.CheckModel(linear.EngineModel, ops, t.Name()); err != nil {
			t.Fatal(err)
		}
	}
	if res != porcupine.Illegal {
		t.Fatalf("checker says %v for three histories of a store whose swap ignores the compared value, want Illegal", res)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("visualization %q: %v", path, err)
	}
	t.Logf("found; visualization: %s", path)
	_ = os.RemoveAll(filepath.Dir(path))
}
