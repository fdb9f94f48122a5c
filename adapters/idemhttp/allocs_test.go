package idemhttp_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// quietWriter is a ResponseWriter that allocates nothing of its own: its
// header map is reused and its body discarded, so that AllocsPerRun counts
// the middleware (and the engine and store under it) alone.
type quietWriter struct {
	h      http.Header
	status int
	n      int
}

func (q *quietWriter) Header() http.Header         { return q.h }
func (q *quietWriter) WriteHeader(status int)      { q.status = status }
func (q *quietWriter) Write(p []byte) (int, error) { q.n += len(p); return len(p), nil }

// replayAllocs is the most allocations a replay may make in Idempotency
// mode over memstore, engine and store included: three below the
// middleware (the engine's claim record and store key, memstore's copy of
// the record; the Claim itself is made only when the key is won) and two
// in it (the fingerprint-and-key string, and the one slice of the replayed
// header values, whose strings alias the stored value). The writer's
// header map is reused here; a fresh one costs one more, as it does for
// any handler. Before this test was added a replay made 14.
const replayAllocs = 5

// TestReplayAllocations pins the allocations of a replay, so that they do
// not creep back.
func TestReplayAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts do not hold under -race")
	}
	h := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser))(trivial)
	body := benchBodies[0]
	rd := bytes.NewReader(body)
	r, err := http.NewRequest(http.MethodPost, "/orders", rd)
	require.NoError(t, err)
	r.Header.Set(userHeader, "alice")
	r.Header.Set(idemhttp.DefaultKeyHeader, "k")
	w := &quietWriter{h: http.Header{}}
	serve := func() {
		rd.Reset(body)
		r.Body, r.ContentLength = readCloser{rd}, int64(len(body))
		clear(w.h)
		w.status, w.n = 0, 0
		h.ServeHTTP(w, r)
	}
	serve()
	require.Equal(t, http.StatusCreated, w.status)
	allocs := testing.AllocsPerRun(200, func() {
		serve()
		if w.status != http.StatusCreated || w.h.Get(idemhttp.ReplayedHeader) != "true" || w.n != len(`{"id":1,"status":"created"}`) {
			t.Fatalf("not a replay: %d %v", w.status, w.h)
		}
	})
	t.Logf("%.1f allocations per replay", allocs)
	require.LessOrEqual(t, allocs, float64(replayAllocs))
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
