package idemhttp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/storetest"
)

// decodeMembers returns a problem body's members as JSON values.
func decodeMembers(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m), "body %s", w.Body)
	return m
}

func TestProblemInstanceIsFreshPerResponse(t *testing.T) {
	mux := keyMux(t, testkit.NewEngine(t), &api{})
	seen := map[string]bool{}
	for range 20 {
		p := requireProblem(t, serve(mux, req{user: "alice"}), 400, idemhttp.ProblemKeyMissing)
		assert.False(t, seen[p.Instance], "instance %s repeated", p.Instance)
		seen[p.Instance] = true
	}
}

func TestProblemInstanceFunction(t *testing.T) {
	byRequestID := idemhttp.WithProblemInstance(func(r *http.Request) string { return "urn:example:req:" + r.Header.Get("X-Request-Id") })
	mux := keyMux(t, testkit.NewEngine(t), &api{}, byRequestID)
	w := serve(mux, req{user: "alice", header: http.Header{"X-Request-Id": {"r-7"}}})
	assert.Equal(t, "urn:example:req:r-7", decodeMembers(t, w)["instance"])
}

// The retryable member says what Retry-After says, on every problem; the
// problem paths of each mode run through requireProblem, which checks it.
func TestProblemRetryableAgreesWithRetryAfter(t *testing.T) {
	a := &api{gate: make(chan struct{})}
	mux := keyMux(t, testkit.NewEngine(t), a)
	q := req{user: "alice", key: "k", body: `{"n":1}`}
	done := make(chan struct{})
	go func() { serve(mux, q); close(done) }()
	require.Eventually(t, func() bool { return a.runs.Load() == 1 }, 5*time.Second, time.Millisecond)
	p := requireProblem(t, serve(mux, q), 409, idemhttp.ProblemInProgress)
	assert.True(t, *p.Retryable)
	close(a.gate)
	<-done
	p = requireProblem(t, serve(mux, req{user: "alice", key: "k", body: `{"n":2}`}), 422, idemhttp.ProblemKeyMismatch)
	assert.False(t, *p.Retryable)
	down := keyMux(t, testkit.NewEngineOn(t, storetest.Unavailable()), &api{})
	p = requireProblem(t, serve(down, q), 503, idemhttp.ProblemUnavailable)
	assert.True(t, *p.Retryable)
}

// The client's own key comes back to it in idempotency_key, where it
// helps to match an error to the request; a malformed key, a token and
// the principal never do.
func TestProblemIdempotencyKeyEcho(t *testing.T) {
	mux := keyMux(t, testkit.NewEngine(t), &api{})
	require.Equal(t, 201, serve(mux, req{user: "alice", key: "order-1", body: `{"n":1}`}).Code)
	p := requireProblem(t, serve(mux, req{user: "alice", key: `"order-1"`, body: `{"n":2}`}), 422, idemhttp.ProblemKeyMismatch)
	assert.Equal(t, "order-1", p.IdempotencyKey, "the parsed key, unquoted")

	bad := serve(mux, req{user: "alice", header: http.Header{idemhttp.DefaultKeyHeader: {`"open`}}})
	requireProblem(t, bad, 400, idemhttp.ProblemKeyInvalid)
	assert.NotContains(t, decodeMembers(t, bad), "idempotency_key", "a malformed key is not echoed")

	tokens := tokenMux(t, testkit.NewEngine(t), &api{})
	tok := issue(t, tokens, "alice")
	w := serve(tokens, req{user: "bob", token: tok})
	requireProblem(t, w, 400, idemhttp.ProblemTokenInvalid)
	assert.NotContains(t, w.Body.String(), tok)
	assert.NotContains(t, decodeMembers(t, w), "idempotency_key")
}

func TestProblemMembersOption(t *testing.T) {
	for _, tc := range []struct {
		members idemhttp.ProblemMembers
		want    []string
	}{
		{0, nil},
		{idemhttp.MemberInstance, []string{"instance"}},
		{idemhttp.MemberRetryable, []string{"retryable"}},
		{idemhttp.MemberIdempotencyKey, []string{"idempotency_key"}},
		{idemhttp.DefaultProblemMembers, []string{"instance", "retryable", "idempotency_key"}},
	} {
		mux := keyMux(t, testkit.NewEngine(t), &api{}, idemhttp.WithProblemMembers(tc.members))
		serve(mux, req{user: "alice", key: "k", body: "1"})
		got := decodeMembers(t, serve(mux, req{user: "alice", key: "k", body: "2"}))
		for _, m := range []string{"instance", "retryable", "idempotency_key"} {
			assert.Equal(t, slices.Contains(tc.want, m), got[m] != nil, "members %#x: %s", tc.members, m)
		}
		for _, m := range []string{"type", "title", "status", "detail"} {
			assert.Contains(t, got, m)
		}
	}
}

func TestProblemBaseOption(t *testing.T) {
	const base = "https://docs.example.com/errors/"
	mux := keyMux(t, testkit.NewEngine(t), &api{}, idemhttp.WithProblemBase(base))
	w := serve(mux, req{user: "alice"})
	assert.Equal(t, base+"key-missing", decodeMembers(t, w)["type"])
	for _, bad := range []string{"", "relative/path/", "https://exa mple.com/", "::"} {
		_, err := idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithProblemBase(bad))
		assert.ErrorIs(t, err, idemkit.ErrInvalid, "base %q", bad)
	}
}

// Every type constant is documented in ProblemTypes, with the status it is
// sent with, and every documented type has a constant.
func TestProblemTypesDocumentEveryType(t *testing.T) {
	constants := map[string]int{
		idemhttp.ProblemKeyMissing: 400, idemhttp.ProblemKeyInvalid: 400, idemhttp.ProblemInProgress: 409,
		idemhttp.ProblemKeyMismatch: 422, idemhttp.ProblemPayloadReused: 409, idemhttp.ProblemDuplicate: 409,
		idemhttp.ProblemTokenMissing: 400, idemhttp.ProblemTokenInvalid: 400, idemhttp.ProblemTokenUsed: 409,
		idemhttp.ProblemBodyTooLarge: 413, idemhttp.ProblemBodyUnreadable: 400, idemhttp.ProblemUnauthenticated: 401,
		idemhttp.ProblemResponseNotStored: 500, idemhttp.ProblemOutcomeUnknown: 500, idemhttp.ProblemUnavailable: 503, idemhttp.ProblemInternal: 500,
	}
	types := idemhttp.ProblemTypes()
	require.Len(t, types, len(constants))
	for _, pt := range types {
		status, ok := constants[idemhttp.DefaultProblemBase+pt.Name]
		if assert.True(t, ok, "%s has no constant", pt.Name) {
			assert.Equal(t, status, pt.Status, pt.Name)
		}
		assert.NotEmpty(t, pt.Title, pt.Name)
		assert.True(t, strings.HasSuffix(pt.Description, "."), "%s: description is a sentence", pt.Name)
	}
	types[0].Name = "changed"
	assert.NotEqual(t, "changed", idemhttp.ProblemTypes()[0].Name, "the list is a copy")
}

func TestReplayHeaderOption(t *testing.T) {
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithReplayHeader("x-replayed")))
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Replayed", "spoofed by the handler")
		w.WriteHeader(http.StatusCreated)
	}))
	q := req{user: "alice", key: "k"}
	fresh := serve(h, q)
	assert.Empty(t, fresh.Header().Values("X-Replayed"), "a fresh response is never marked")
	again := serve(h, q)
	assert.Equal(t, []string{"true"}, again.Header().Values("X-Replayed"))
	assert.Empty(t, again.Header().Values(idemhttp.ReplayedHeader))
	_, err := idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithReplayHeader("bad header"))
	assert.ErrorIs(t, err, idemkit.ErrInvalid)
}
