package completer_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/completer"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/sqlstore"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver
)

const (
	user       = "alice@example.com"
	crashedKey = "order-CRASHED-1"
	runningKey = "order-RUNNING-2"
	doneKey    = "order-DONE-3"
	releaseKey = "order-RELEASED-4"
	recentKey  = "order-RECENT-5"
)

var scope = idemkit.WithScope(user)

// crash claims key and records the steps "reserve" and "charge" under it,
// then leaves the claim as a crashed process would: no heartbeat, never
// ended. between runs between the two steps.
func crash(t *testing.T, e *idemkit.Engine, key string, between func()) *idemkit.Claim {
	t.Helper()
	ctx := context.Background()
	c, _, err := e.Begin(ctx, key, "fp", scope, idemkit.WithoutHeartbeat())
	if err != nil || c == nil {
		t.Fatalf("Begin(%s) = %v, %v", key, c, err)
	}
	for i, name := range []string{"reserve", "charge"} {
		if i > 0 && between != nil {
			between()
		}
		if _, err := idemkit.Step(c.Context(ctx), name, func(context.Context) ([]byte, error) { return []byte(name + " ok"), nil }); err != nil {
			t.Fatalf("Step %s: %v", name, err)
		}
	}
	return c
}

// others writes a claim that runs (with its heartbeat; released when the
// test ends), a completed operation and a released claim: none is
// abandoned.
func others(t *testing.T, e *idemkit.Engine) {
	t.Helper()
	ctx := context.Background()
	running, _, err := e.Begin(ctx, runningKey, "fp", scope)
	if err != nil || running == nil {
		t.Fatalf("Begin running = %v, %v", running, err)
	}
	t.Cleanup(func() { running.Release(context.Background()) })
	if _, err := idemkit.Step(running.Context(ctx), "reserve", func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Do(ctx, doneKey, "fp", func(ctx context.Context) ([]byte, error) {
		return idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) { return []byte("done"), nil })
	}, scope); err != nil {
		t.Fatal(err)
	}
	released, _, err := e.Begin(ctx, releaseKey, "fp", scope, idemkit.WithoutHeartbeat())
	if err != nil || released == nil {
		t.Fatalf("Begin released = %v, %v", released, err)
	}
	released.Release(ctx)
}

// checkCrashed fails t unless rep reports exactly the crashed operation
// of c, with its two steps, and nothing in clear.
func checkCrashed(t *testing.T, rep completer.Report, c *idemkit.Claim, exactLast bool) completer.Abandoned {
	t.Helper()
	if len(rep.Abandoned) != 1 {
		t.Fatalf("reported %d operations, want 1: %+v", len(rep.Abandoned), rep)
	}
	a := rep.Abandoned[0]
	if a.Steps != 2 || a.Fence != c.Fence() || a.Scope == "" || a.Scope == "-" || !strings.HasPrefix(a.StoreKey, "idem:i:"+a.Scope+":") {
		t.Errorf("reported %+v, want 2 steps, fence %d, a scope digest", a, c.Fence())
	}
	last := []string{completer.StepDigest("charge")}
	if !exactLast { // the two steps may share a millisecond
		last = append(last, completer.StepDigest("reserve"))
	}
	if !strings.Contains(strings.Join(last, " "), a.LastStep) || a.LastStep == "" || a.LastStepAt.Before(a.Created) {
		t.Errorf("last step %q at %v, want one of %v at or after %v", a.LastStep, a.LastStepAt, last, a.Created)
	}
	text := strings.ToLower(a.StoreKey + a.Scope + a.LastStep + a.FingerprintDigest)
	for _, secret := range []string{"alice", "order", "crashed", "charge"} {
		if strings.Contains(text, secret) {
			t.Errorf("the report holds %q: %+v", secret, a)
		}
	}
	return a
}

// TestFindReportsACrashedOperationOnceItsLeaseEndsAndTheThresholdPasses
// runs on memstore in a synctest bubble: a crashed claim with two steps is
// recent (not reported) while younger than the threshold, and reported
// with its steps, age and token after; a running claim, a completed
// operation, a released claim and another namespace's crashed claim never
// are.
func TestFindReportsACrashedOperationOnceItsLeaseEndsAndTheThresholdPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := testkit.NewMem(t)
		e := testkit.NewEngineOn(t, s, idemkit.WithLease(2*time.Second))
		other := testkit.NewEngineOn(t, s, idemkit.WithLease(2*time.Second), idemkit.WithNamespace("shop"))
		start := time.Now()
		c := crash(t, e, crashedKey, func() { time.Sleep(10 * time.Millisecond) })
		crash(t, other, crashedKey, nil)
		others(t, e)
		var seen []completer.Abandoned
		find := func(opts ...completer.Option) completer.Report {
			t.Helper()
			rep, err := completer.Find(ctx, e, s, append([]completer.Option{completer.WithObserver(func(a completer.Abandoned) { seen = append(seen, a) })}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			return rep
		}

		rep := find()
		if len(rep.Abandoned) != 0 || rep.Recent != 0 || rep.InProgress != 2 || rep.Scanned != 4 {
			t.Fatalf("while the lease runs: %+v, want 2 in progress of 4, none recent or reported", rep)
		}
		time.Sleep(3 * time.Second)
		if rep = find(); len(rep.Abandoned) != 0 || rep.Recent != 1 {
			t.Fatalf("lease ended, under the threshold: %+v, want 1 recent, none reported", rep)
		}
		time.Sleep(time.Minute)
		recent := crash(t, e, recentKey, nil)
		time.Sleep(3 * time.Second)
		rep = find()
		a := checkCrashed(t, rep, c, true)
		if want := time.Minute + 6*time.Second + 10*time.Millisecond; a.Age != want || !a.Created.Equal(start) || !a.LastStepAt.Equal(start.Add(10*time.Millisecond)) {
			t.Errorf("age %v created %v last step at %v, want %v, %v, %v", a.Age, a.Created, a.LastStepAt, want, start, start.Add(10*time.Millisecond))
		}
		if rep.Recent != 1 || rep.InProgress != 3 || rep.Scanned != 5 || rep.Unreadable != 0 {
			t.Errorf("counts %+v, want 1 recent, 3 in progress of 5", rep)
		}
		if len(seen) != 1 || !reflect.DeepEqual(seen[0], a) {
			t.Errorf("observer saw %+v, want %+v", seen, a)
		}

		// A lower threshold reports the recent one too, oldest first.
		rep = find(completer.WithOlderThan(0))
		if len(rep.Abandoned) != 2 || rep.Abandoned[0].Fence != c.Fence() || rep.Abandoned[1].Fence != recent.Fence() || rep.Recent != 0 {
			t.Errorf("WithOlderThan(0): %+v, want the crashed, then the recent", rep)
		}

		// A retry takes the key over: nothing is abandoned any more.
		res, err := e.Do(ctx, crashedKey, "fp", func(ctx context.Context) ([]byte, error) {
			return idemkit.Step(ctx, "charge", func(context.Context) ([]byte, error) { return nil, errors.New("charged twice") })
		}, scope)
		if err != nil || string(res.Value) != "charge ok" {
			t.Fatalf("retry = %+v, %v; want the recorded charge", res, err)
		}
		if rep = find(); len(rep.Abandoned) != 0 {
			t.Errorf("after the retry: %+v, want none", rep)
		}
	})
}

// TestFindRunsOnSeveralInstancesAtOnce: passes only read, so several at
// once report the same.
func TestFindRunsOnSeveralInstancesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := testkit.NewMem(t)
		e := testkit.NewEngineOn(t, s, idemkit.WithLease(time.Second))
		c := crash(t, e, crashedKey, func() { time.Sleep(time.Millisecond) })
		time.Sleep(2 * time.Minute)
		reps := make([]completer.Report, 8)
		var wg sync.WaitGroup
		for i := range reps {
			wg.Go(func() {
				rep, err := completer.Find(context.Background(), e, s)
				if err != nil {
					t.Error(err)
				}
				reps[i] = rep
			})
		}
		wg.Wait()
		checkCrashed(t, reps[0], c, true)
		for i, rep := range reps[1:] {
			if !reflect.DeepEqual(rep, reps[0]) {
				t.Errorf("instance %d reported %+v, instance 0 %+v", i+1, rep, reps[0])
			}
		}
	})
}

func TestFindStopsWhenTheContextEnds(t *testing.T) {
	s := testkit.NewMem(t)
	e := testkit.NewEngineOn(t, s)
	if _, err := e.Do(context.Background(), doneKey, "fp", func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := completer.Find(ctx, e, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("Find with an ended context = %v, want context.Canceled", err)
	}
}

// findOn runs the crash scenario on a real store: a lease of a second,
// waited for by polling, then a pass with no threshold.
func findOn(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	sc, ok := s.(store.Scanner)
	if !ok {
		t.Fatalf("%T is no store.Scanner", s)
	}
	e := testkit.NewEngineOn(t, s, idemkit.WithLease(time.Second))
	c := crash(t, e, crashedKey, nil)
	others(t, e)
	testkit.WaitFor(t, "the crashed claim's lease to end", func() bool {
		info, err := e.Inspect(ctx, idemkit.ModeDo, crashedKey, scope)
		return err == nil && info.Lease == 0
	})
	rep, err := completer.Find(ctx, e, sc, completer.WithOlderThan(0))
	if err != nil {
		t.Fatal(err)
	}
	checkCrashed(t, rep, c, false)
	if rep.InProgress != 2 || rep.Scanned != 4 {
		t.Errorf("counts %+v, want 2 in progress of 4", rep)
	}
}

func TestFindOnBolt(t *testing.T) {
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "idem.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	findOn(t, s)
}

func TestFindOnRedis(t *testing.T) {
	s, err := redisstore.New(redistest.Start(t).Client(t))
	if err != nil {
		t.Fatal(err)
	}
	findOn(t, s)
}

func TestFindOnRedisCluster(t *testing.T) {
	s, err := redisstore.New(redistest.StartCluster(t, 3).Client(t))
	if err != nil {
		t.Fatal(err)
	}
	findOn(t, s)
}

// TestFindOnPostgres uses the PostgreSQL server on 127.0.0.1:5432, in a
// table of its own that it drops.
func TestFindOnPostgres(t *testing.T) {
	db, err := sql.Open(sqlstore.PostgresDriver, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	table := fmt.Sprintf("completer_test_%d", time.Now().UnixNano())
	s, err := sqlstore.New(db, sqlstore.Postgres, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		if _, err := db.Exec("DROP TABLE " + table); err != nil {
			t.Error(err)
		}
	})
	findOn(t, s)
}
