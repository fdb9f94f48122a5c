package bench

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stormRounds is how many storms (fresh key each) a test sends per stack.
const stormRounds = 20

// TestDuplicatesAcrossInstances sends storms of concurrent duplicates over two
// instances sharing one Redis. idemkit must run the handler exactly once per
// key; every other request gets 409 (default) or the replayed 201 (WithWait).
// Fiber's outcome is logged, not asserted: its locker is in-process, so each
// instance may run the handler once.
func TestDuplicatesAcrossInstances(t *testing.T) {
	for _, s := range stormStacks {
		t.Run(s.name, func(t *testing.T) {
			o := &orders{work: dupWork}
			urls, c := twoInstances(t, s, o)
			doubled := 0
			defer func() {
				if s.name == fiberStack.name {
					t.Logf("fiber ran the handler more than once per key in %d of %d rounds", doubled, stormRounds)
				}
			}()
			for range stormRounds {
				before := o.runs.Load()
				out := summarise(storm(t, c, urls, newKey(), dupRequests))
				runs := o.runs.Load() - before
				if s.name == fiberStack.name {
					if runs > 1 {
						doubled++
					}
					t.Logf("fiber: %d handler runs, %d distinct orders in %d responses (201: %d, 409: %d, other: %d)",
						runs, out.orders, dupRequests, out.created, out.conflicts, out.other)
					continue
				}
				checkIdemkitStorm(t, s.name, runs, out)
			}
		})
	}
}

func checkIdemkitStorm(t *testing.T, name string, runs int64, out stormOutcome) {
	t.Helper()
	require.Equal(t, int64(1), runs, "handler runs for one key across two instances")
	assert.Equal(t, 0, out.other, "statuses other than 201 and 409")
	assert.Equal(t, 1, out.orders, "distinct orders seen by clients")
	assert.Equal(t, dupRequests, out.created+out.conflicts)
	if name == "idemkit-wait" {
		assert.Equal(t, dupRequests, out.created, "with WithWait every duplicate gets the replay")
	}
}

// TestFiberOneInstance checks the Fiber configuration the comparison uses:
// within one instance its in-process lock serialises duplicates and the
// handler runs once per key, so the extra runs seen across two instances come
// from the locker's scope, not from a misconfiguration.
func TestFiberOneInstance(t *testing.T) {
	o := &orders{work: dupWork}
	u := startFiber(t, o, true)
	c := newHTTPClient(t)
	for range stormRounds {
		before := o.runs.Load()
		out := summarise(storm(t, c, []string{u}, newKey(), dupRequests))
		require.Equal(t, int64(1), o.runs.Load()-before, "handler runs for one key on one instance")
		assert.Equal(t, stormOutcome{created: dupRequests, orders: 1}, out)
	}
}

// TestReplayMatches checks both stacks replay the first response: same status
// and body, and the handler ran once.
func TestReplayMatches(t *testing.T) {
	for _, s := range guardedStacks {
		t.Run(s.name, func(t *testing.T) {
			o := &orders{}
			u := s.start(t, o)
			c := newHTTPClient(t)
			key := newKey()
			first, err := post(c, u, key)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, first.status, first.body)
			for range 3 {
				again, err := post(c, u, key)
				require.NoError(t, err)
				assert.Equal(t, first, again)
			}
			assert.Equal(t, int64(1), o.runs.Load())
		})
	}
}

// TestKeyReuse sends a completed key again with another body, then as
// another user. idemkit fingerprints the payload (422) and scopes keys by
// principal (the other user's request runs as a new one); Fiber compares
// neither and replays the stored response to both.
func TestKeyReuse(t *testing.T) {
	cases := []struct {
		stack             stack
		otherBody         int   // status for the same key with another body
		otherUser         int64 // handler runs after the other user's request
		otherUserReplayed bool  // whether the other user got the first order
	}{
		{idemkitStack, http.StatusUnprocessableEntity, 2, false},
		{idemkitFiberStack, http.StatusUnprocessableEntity, 2, false},
		{fiberStack, http.StatusCreated, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.stack.name, func(t *testing.T) {
			o := &orders{}
			u := tc.stack.start(t, o)
			c := newHTTPClient(t)
			key := newKey()
			first, err := post(c, u, key)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, first.status, first.body)

			r, err := postAs(c, u, key, benchUser, `{"sku":"book-42","qty":100}`)
			require.NoError(t, err)
			assert.Equal(t, tc.otherBody, r.status, r.body)

			r, err = postAs(c, u, key, "user-2", orderBody)
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, r.status, r.body)
			assert.Equal(t, tc.otherUserReplayed, r.body == first.body, "other user got the first order")
			assert.Equal(t, tc.otherUser, o.runs.Load())
		})
	}
}
