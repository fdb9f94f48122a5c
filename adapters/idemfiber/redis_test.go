package idemfiber_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/redisstore"
)

// TestTwoInstancesOneRedis runs two Fiber instances, each with its own
// Redis client, store and engine, over one Redis, and sends bursts of
// concurrent requests with one key spread over both: the handler runs
// exactly once per key in every round (Fiber's own middleware, whose lock
// is per process, ran it twice in 20 of 20 rounds).
func TestTwoInstancesOneRedis(t *testing.T) {
	const rounds, burst = 20, 50
	srv := redistest.Start(t)
	o := &orders{work: 5 * time.Millisecond}
	var urls []string
	for range 2 {
		st, err := redisstore.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, serve(t, testkit.NewEngineOn(t, st), o)+"/orders/1")
	}
	for round := range rounds {
		key := "burst-" + strconv.Itoa(round)
		before := o.runs.Load()
		answers := make([]answer, burst)
		errs := make([]error, burst)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				<-start
				answers[i], errs[i] = trySend("POST", urls[i%2], body, as("alice", key)...)
			})
		}
		close(start)
		wg.Wait()
		bodies := map[string]bool{}
		for i, a := range answers {
			switch {
			case errs[i] != nil:
				t.Fatalf("round %d: %v", round, errs[i])
			case a.status == http.StatusCreated:
				bodies[a.body] = true
			case a.status != http.StatusConflict:
				t.Fatalf("round %d: answer %v", round, a)
			}
		}
		if runs := o.runs.Load() - before; runs != 1 || len(bodies) != 1 {
			t.Fatalf("round %d: handler ran %d times, clients saw %d orders; want 1 and 1", round, runs, len(bodies))
		}
	}
}
