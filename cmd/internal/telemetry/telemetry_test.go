package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/layout"
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/store/memstore"
)

// scrape returns the lines of GET /metrics that start with prefix.
func scrape(t *testing.T, tel *Telemetry, prefix string) []string {
	t.Helper()
	w := httptest.NewRecorder()
	tel.Metrics.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", w.Code)
	}
	body, _ := io.ReadAll(w.Body)
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// The memstore eviction and refusal callbacks and the tiered store's
// observer feed the evictions, refusals, breaker transitions and
// copy-forward conflicts counters, with the breaker's previous and new
// state; no key reaches a label.
func TestCallbacksFeedTheCounters(t *testing.T) {
	tel, err := New(idemkit.ObserverFunc(func(context.Context, idemkit.Event) {}))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memstore.New(memstore.WithCapacity(1), memstore.WithShards(1), memstore.WithOnEvict(tel.Evicted))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	ctx := context.Background()
	for _, k := range []string{"secret-a", "secret-b", "secret-c"} {
		if _, _, err := mem.SetNX(ctx, k, []byte("v"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	full, err := memstore.New(memstore.WithCapacity(1), memstore.WithShards(1), memstore.WithOnFull(tel.Refused))
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	claim := append([]byte{layout.RecordVersion, layout.StateInProgress}, make([]byte, layout.RecordHeaderLen-1)...) // the engine's claim in progress
	if _, _, err := full.SetNX(ctx, "secret-claim", claim, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, _, err := full.SetNX(ctx, "secret-f", []byte("v"), time.Minute); !errors.Is(err, memstore.ErrFull) {
		t.Fatalf("SetNX into a store full of claims: %v, want ErrFull", err)
	}
	for _, k := range []tiered.EventKind{tiered.EventOpen, tiered.EventHalfOpen, tiered.EventOpen, tiered.EventHalfOpen, tiered.EventClosed, tiered.EventCopied} {
		tel.OnTierEvent(tiered.Event{Kind: k, Key: "secret-d"})
	}
	tel.OnTierEvent(tiered.Event{Kind: tiered.EventConflict, Key: "secret-e"})

	want := map[string]string{
		"idemkit_evictions_total{":      "2",
		"idemkit_store_refusals_total{": "1",
		`idemkit_breaker_transitions_total{idemkit_breaker_from="closed",idemkit_breaker_state="open"`:      "1",
		`idemkit_breaker_transitions_total{idemkit_breaker_from="open",idemkit_breaker_state="half_open"`:   "2",
		`idemkit_breaker_transitions_total{idemkit_breaker_from="half_open",idemkit_breaker_state="open"`:   "1",
		`idemkit_breaker_transitions_total{idemkit_breaker_from="half_open",idemkit_breaker_state="closed"`: "1",
		"idemkit_copy_forward_conflicts_total{":                                                             "1",
	}
	lines := scrape(t, tel, "idemkit_")
	for prefix, n := range want {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				found = true
				if !strings.HasSuffix(l, " "+n) {
					t.Errorf("%s: want %s", l, n)
				}
			}
		}
		if !found {
			t.Errorf("no line %s... in %q", prefix, lines)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "secret") {
			t.Errorf("a key in a metric: %s", l)
		}
	}
}

// WrapStore measures the store's operations into idemkit_store_duration_seconds.
func TestWrapStoreIsMeasured(t *testing.T) {
	tel, err := New(idemkit.ObserverFunc(func(context.Context, idemkit.Event) {}))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	st, err := tel.WrapStore(mem)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if _, _, err := st.SetNX(context.Background(), "k", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	lines := scrape(t, tel, `idemkit_store_duration_seconds_count{`)
	if len(lines) != 1 || !strings.Contains(lines[0], `idemkit_store_operation="SetNX"`) || !strings.HasSuffix(lines[0], " 1") {
		t.Errorf("store duration: %q", lines)
	}
}
