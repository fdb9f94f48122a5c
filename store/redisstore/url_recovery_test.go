package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// recoveryLag kills srv, keeps 8 goroutines calling s for outage (long
// enough to trip go-redis's dial breaker), restarts srv and returns how
// long after srv answered PING again the first call through s succeeded.
func recoveryLag(t *testing.T, srv *redistest.Server, s store.Store, outage time.Duration) time.Duration {
	t.Helper()
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := s.Get(ctx, "recovery")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	// Warm up: a first call dials (and, loaded, may need more than 50 ms).
	for start := time.Now(); ; {
		err := call()
		if err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("before the outage: %v", err)
		}
	}
	srv.Stop()
	var wg sync.WaitGroup
	stop := time.Now().Add(outage)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				_ = call()
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	srv.Restart()
	back := time.Now()
	for call() != nil {
		if time.Since(back) > 10*time.Second {
			t.Fatal("no success 10s after the restart")
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(back)
}

// TestRecoveryAfterRestart measures how long a store opened by URL keeps
// failing after Redis is back (go-redis's dial breaker probes once a
// second), against a plain go-redis client. It logs the figures: run
// with -v -run TestRecoveryAfterRestart.
func TestRecoveryAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts redis-server several times")
	}
	srv := redistest.Start(t)
	const rounds = 6
	for _, c := range []struct {
		name string
		open func() store.Store
	}{
		{"plain go-redis client", func() store.Store {
			o := srv.Options()
			o.MaxRetries, o.ContextTimeoutEnabled = -1, true
			c := redis.NewClient(o)
			t.Cleanup(func() { c.Close() })
			s, err := redisstore.New(c)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"go-redis client with Redialer", func() store.Store {
			o := srv.Options()
			o.MaxRetries, o.ContextTimeoutEnabled = -1, true
			o.Dialer = redisstore.Redialer(nil)
			c := redis.NewClient(o)
			t.Cleanup(func() { c.Close() })
			s, err := redisstore.New(c)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"store.Open URL", func() store.Store {
			s, err := store.Open(context.Background(), "redis://"+srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.(store.Closer).Close() })
			return s
		}},
	} {
		s := c.open()
		var lags []time.Duration
		for round := range rounds {
			// Outages from 300 ms to 1.2 s spread Redis's return over the
			// breaker's one-second probe period.
			outage := 300*time.Millisecond + time.Duration(round)*180*time.Millisecond
			lags = append(lags, recoveryLag(t, srv, s, outage).Round(time.Millisecond))
		}
		var sum, worst time.Duration
		for _, l := range lags {
			sum += l
			worst = max(worst, l)
		}
		t.Logf("%s: first success after restart: mean %v, max %v, all %v", c.name, sum/rounds, worst, lags)
	}
}
