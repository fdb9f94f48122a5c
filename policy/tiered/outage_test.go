package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/policy/budget"
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// Phases of every fault scenario.
const (
	steadyPhase   = 300 * time.Millisecond
	outagePhase   = time.Second
	recoveryPhase = 2500 * time.Millisecond
	// recoveryLimit is how soon after the restart service must be back.
	recoveryLimit = 2 * time.Second
	// faultBudget is the default budget: a killed server refuses at once,
	// and a smaller budget would turn the slow answers of a loaded machine
	// into outages outside the outage.
	faultBudget = budget.Default
)

// fastFailClient returns a client that gives up quickly on a dead server
// and follows it back at once: short timeouts, no command retries, one
// dial attempt, no dial back-off.
func fastFailClient(t *testing.T, srv *redistest.Server) *redis.Client {
	o := srv.Options()
	o.DialTimeout = faultBudget
	o.ReadTimeout = faultBudget
	o.WriteTimeout = faultBudget
	o.PoolTimeout = faultBudget
	o.MaxRetries = -1
	o.DialerRetries = 1
	// go-redis stops dialling after PoolSize failed dials in a row and then
	// probes once a second, which would keep the client failing for up to
	// a second after Redis is back; a pool this large never trips it here.
	o.PoolSize = 1 << 16
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// requireOwnServer fails the test when the address of srv is answered by
// another redis-server (a port taken meanwhile by another process).
func requireOwnServer(t *testing.T, srv *redistest.Server) {
	t.Helper()
	c := srv.Client(t)
	dir, err := c.ConfigGet(context.Background(), "dir").Result()
	require.NoError(t, err)
	require.Equal(t, srv.Dir(), dir["dir"], "%s is answered by another redis-server", srv.Addr())
}

// budgetedRedis is a redisstore behind a time budget.
func budgetedRedis(t *testing.T, srv *redistest.Server) store.Store {
	rs, err := redisstore.New(fastFailClient(t, srv))
	require.NoError(t, err)
	return mustBudget(t, rs, faultBudget)
}

// attempt is one request of a fault scenario.
type attempt struct {
	n          int  // logical submission
	dup        bool // the second send of submission n
	start, end time.Time
	ran        bool // fn ran
	unguarded  bool // fn ran without protection (Do under fail-open)
	err        error
}

// timeline records when the server was stopped and restarted.
type timeline struct {
	stopping   time.Time // Stop was called
	stopped    time.Time // Stop returned: the server is dead
	restarting time.Time // Restart was called
	restarted  time.Time // Restart returned: the server answers
}

func (tl timeline) inOutage(a attempt) bool {
	return a.start.After(tl.stopped) && a.end.Before(tl.restarting)
}

// runOutage sends a steady stream of submissions, each twice in a row,
// through send while srv is killed and restarted, and returns every
// attempt in order.
func runOutage(t *testing.T, srv *redistest.Server, send func(ctx context.Context, n int, dup bool) attempt) ([]attempt, timeline) {
	var (
		mu       sync.Mutex
		attempts []attempt
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	wg.Go(func() {
		for n := 0; !stop.Load(); n++ {
			for _, dup := range []bool{false, true} {
				a := send(context.Background(), n, dup)
				mu.Lock()
				attempts = append(attempts, a)
				mu.Unlock()
			}
			time.Sleep(time.Millisecond)
		}
	})
	var tl timeline
	requireOwnServer(t, srv)
	time.Sleep(steadyPhase)
	tl.stopping = time.Now()
	srv.Stop()
	tl.stopped = time.Now()
	time.Sleep(outagePhase)
	tl.restarting = time.Now()
	srv.Restart()
	tl.restarted = time.Now()
	requireOwnServer(t, srv)
	time.Sleep(recoveryPhase)
	stop.Store(true)
	wg.Wait()
	return attempts, tl
}

// guardSender sends submissions through e.Guard.
func guardSender(e *idemkit.Engine, prefix string) func(context.Context, int, bool) attempt {
	return func(ctx context.Context, n int, dup bool) attempt {
		a := attempt{n: n, dup: dup, start: time.Now()}
		a.err = e.Guard(ctx, fmt.Sprintf("%s-%d", prefix, n), func(context.Context) error {
			a.ran = true
			return nil
		})
		a.end = time.Now()
		return a
	}
}

// counts summarises attempts.
type counts struct {
	total, ran, duplicates, unavailable, unguarded, other int
}

func countOf(as []attempt) counts {
	var c counts
	for _, a := range as {
		c.total++
		switch {
		case a.unguarded:
			c.unguarded++
		case a.ran && a.err == nil:
			c.ran++
		case errors.Is(a.err, idemkit.ErrDuplicate):
			c.duplicates++
		case errors.Is(a.err, idemkit.ErrUnavailable):
			c.unavailable++
		default:
			c.other++
		}
	}
	return c
}

func filter(as []attempt, keep func(attempt) bool) []attempt {
	var out []attempt
	for _, a := range as {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

// normal reports whether a attempt had the outcome of a healthy store: a
// first send admitted under protection, a duplicate rejected (or replayed).
func normal(a attempt) bool {
	if a.dup {
		return errors.Is(a.err, idemkit.ErrDuplicate)
	}
	return a.ran && !a.unguarded && a.err == nil
}

// requireNormalAfter asserts that every attempt ending later than
// recoveryLimit after the restart was normal, and that normal service
// resumed: it returns how long after the restart the last abnormal attempt
// ended (0 if none), and how many attempts after the restart were abnormal.
func requireNormalAfter(t *testing.T, as []attempt, tl timeline) (took time.Duration, abnormal int) {
	t.Helper()
	last := tl.restarted
	normals := 0
	for _, a := range as {
		if !a.end.After(tl.restarted) {
			continue
		}
		if normal(a) {
			normals++
			continue
		}
		abnormal++
		last = a.end
		assert.LessOrEqual(t, a.end.Sub(tl.restarted), recoveryLimit,
			"submission %d (dup=%v) abnormal %v after the restart: %v", a.n, a.dup, a.end.Sub(tl.restarted), a.err)
	}
	require.NotZero(t, normals, "no normal request after the restart")
	return last.Sub(tl.restarted), abnormal
}

func TestRedisOutageFailClosed(t *testing.T) {
	srv := redistest.Start(t)
	e, log := newEngine(t, budgetedRedis(t, srv), idemkit.WithWindow(30*time.Second))
	as, tl := runOutage(t, srv, guardSender(e, "closed"))

	outage := countOf(filter(as, tl.inOutage))
	require.NotZero(t, outage.total)
	assert.Zero(t, outage.ran, "fail-closed admits nothing during the outage")
	assert.Equal(t, outage.total, outage.unavailable, "every request gets ErrUnavailable")
	assert.Empty(t, log.Of(idemkit.EventFailOpen))
	took, abnormal := requireNormalAfter(t, as, tl)
	all := countOf(as)
	t.Logf("fail-closed: %d requests; outage %v: %d requests, %d admitted, %d ErrUnavailable; whole run: %d admitted, %d duplicates rejected, %d ErrUnavailable, %d other; normal %v after restart (%d abnormal after it)",
		all.total, tl.restarting.Sub(tl.stopped).Round(time.Millisecond), outage.total, outage.ran, outage.unavailable,
		all.ran, all.duplicates, all.unavailable, all.other, took.Round(time.Millisecond), abnormal)
}

func TestRedisOutageFailOpen(t *testing.T) {
	srv := redistest.Start(t)
	e, log := newEngine(t, budgetedRedis(t, srv), idemkit.WithFailureMode(idemkit.FailOpen))
	send := func(ctx context.Context, n int, dup bool) attempt {
		a := attempt{n: n, dup: dup, start: time.Now()}
		res, err := e.Do(ctx, fmt.Sprintf("open-%d", n), "fp", func(context.Context) ([]byte, error) {
			a.ran = true
			return []byte("ok"), nil
		})
		a.end, a.err, a.unguarded = time.Now(), err, res.Unguarded
		if res.Replayed && err == nil {
			a.err = idemkit.ErrDuplicate // replayed: counted with duplicates
		}
		return a
	}
	as, tl := runOutage(t, srv, send)

	outage := countOf(filter(as, tl.inOutage))
	require.NotZero(t, outage.total)
	assert.Equal(t, outage.total, outage.unguarded, "fail-open admits every request during the outage, unguarded")
	all := countOf(as)
	failOpens := len(log.Of(idemkit.EventFailOpen))
	assert.Equal(t, all.unguarded, failOpens, "every unguarded admission is recorded")
	runs := 0
	for _, a := range as {
		if a.ran {
			runs++
		}
	}
	assert.Equal(t, runs, len(log.Of(idemkit.EventAdmitted))+failOpens, "every run is either admitted or recorded as fail-open")
	took, abnormal := requireNormalAfter(t, as, tl)
	t.Logf("fail-open: %d requests; outage: %d requests, %d unguarded; whole run: %d unguarded, %d EventFailOpen, %d guarded runs, %d replays, %d other; normal %v after restart (%d abnormal after it)",
		all.total, outage.total, outage.unguarded, all.unguarded, failOpens, all.ran, all.duplicates, all.other, took.Round(time.Millisecond), abnormal)
}

func TestRedisOutageTiered(t *testing.T) {
	srv := redistest.Start(t)
	var closedAt atomic.Pointer[time.Time]
	observe := func(ev tiered.Event) {
		if ev.Kind == tiered.EventClosed {
			now := time.Now()
			closedAt.Store(&now)
		}
	}
	ts := mustTiered(t, budgetedRedis(t, srv), newMem(t),
		tiered.WithFailureThreshold(3), tiered.WithCoolDown(200*time.Millisecond), tiered.WithObserver(observe))
	t.Cleanup(func() { _ = ts.Close() })
	e, _ := newEngine(t, ts.Store, idemkit.WithWindow(30*time.Second))
	as, tl := runOutage(t, srv, guardSender(e, "tiered"))

	outageAs := filter(as, tl.inOutage)
	outage := countOf(outageAs)
	require.NotZero(t, outage.total)
	straddling, refused, slowRefused := 0, 0, 0
	for i := 0; i+1 < len(as); i += 2 {
		first, dup := as[i], as[i+1]
		if errors.Is(first.err, idemkit.ErrUnavailable) {
			// Redis failed the claim while the breaker still let calls
			// through (before it opened, a failed probe, or a call over
			// the budget on a loaded machine): the claim's outcome is
			// unknown, so it is refused, not re-made in the fallback.
			require.False(t, first.ran, "submission %d: refused but ran", first.n)
			refused++
			if first.end.Before(tl.stopping) || first.start.After(tl.restarted.Add(recoveryLimit)) {
				slowRefused++
			}
			continue
		}
		require.True(t, first.ran && first.err == nil, "submission %d: every first send is admitted or refused: %v", first.n, first.err)
		if dup.end.Before(tl.stopping) || first.start.After(tl.stopped) {
			require.ErrorIs(t, dup.err, idemkit.ErrDuplicate, "submission %d: every duplicate is rejected", dup.n)
		} else if !errors.Is(dup.err, idemkit.ErrDuplicate) {
			// Claimed in Redis just before the kill, repeated after it:
			// the fallback never saw the claim (documented limitation).
			straddling++
		}
	}
	closed := closedAt.Load()
	require.NotNil(t, closed, "the breaker closed again")
	took := closed.Sub(tl.restarted)
	assert.LessOrEqual(t, took, recoveryLimit, "back on Redis %v after the restart", took)
	require.Eventually(t, func() bool { return ts.Stats().Journal == 0 }, 5*time.Second, 10*time.Millisecond)
	st := ts.Stats()
	assert.Equal(t, tiered.BreakerClosed, st.State)
	assert.NotZero(t, st.FallbackOps)
	assert.NotZero(t, st.Copied)
	assert.Zero(t, st.CopyFailed)
	assert.Zero(t, st.JournalDropped)

	// Another instance, with its own empty fallback, sees every claim made
	// during the outage: they were copied forward into Redis.
	other := mustTiered(t, budgetedRedis(t, srv), newMem(t))
	t.Cleanup(func() { _ = other.Close() })
	e2, _ := newEngine(t, other.Store, idemkit.WithWindow(30*time.Second))
	seen := 0
	for _, a := range outageAs {
		if a.dup || !a.ran {
			continue
		}
		err := e2.Guard(ctx, fmt.Sprintf("tiered-%d", a.n), func(context.Context) error { return nil })
		assert.ErrorIs(t, err, idemkit.ErrDuplicate, "outage claim %d is in Redis", a.n)
		seen++
	}
	require.NotZero(t, seen)
	all := countOf(as)
	t.Logf("tiered: %d requests; outage: %d requests, %d admitted, %d duplicates rejected, %d ErrUnavailable; whole run: %d admitted, %d duplicates rejected, %d errors (%d first sends refused while Redis failed with the breaker closed or probing, %d of them outside the outage), %d duplicates admitted across the kill (claimed in Redis before it); back on Redis %v after restart; stats %+v; %d outage claims found in Redis by another instance",
		all.total, outage.total, outage.ran, outage.duplicates, outage.unavailable, all.ran, all.duplicates, all.unavailable+all.other, refused, slowRefused, straddling,
		took.Round(time.Millisecond), st, seen)
}
