package httpconform

import (
	"context"
	"net/http"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/redisstore"
)

// testTwoInstances serves one handler from two instances of the adapter
// (two servers, two engines, two Redis clients) over one redis-server of
// its own, as two replicas of a service would: concurrent duplicates sent
// to both run the handler once, for a key and for a token.
func testTwoInstances(t *testing.T, serve Framework) {
	srv := redistest.Start(t)
	var engines [2]*idemkit.Engine
	for i := range engines {
		s, err := redisstore.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		engines[i] = testkit.NewEngineOn(t, s)
	}
	tok, err := engines[0].IssueToken(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		mode    Mode
		headers []string
		other   int // what a duplicate may get besides a replay
	}{
		{"key", Idempotency, As("alice", "shared-key"), http.StatusConflict},
		{"token", Token, WithToken("alice", tok.Value), http.StatusConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Orders{}
			var urls [2]string
			for i, e := range engines {
				urls[i] = serve(t, e, o, Config{Mode: tc.mode}) + "/orders/1"
			}
			fresh := race(t, 64, func(i int) (Answer, error) { return TrySend("POST", urls[i%2], Body, tc.headers...) }, tc.other)
			if runs := o.Runs(); runs != 1 || fresh != 1 {
				t.Fatalf("handler ran %d times and %d answers were fresh across two instances, want 1 and 1", runs, fresh)
			}
			// Each instance replays what one of them stored.
			for i, u := range urls {
				a := Send(t, "POST", u, Body, tc.headers...)
				if a.Status != http.StatusCreated || a.Header.Get(httpcore.ReplayedHeader) != "true" {
					t.Errorf("instance %d after the race: %v, want the replay", i, a)
				}
			}
		})
	}
}
