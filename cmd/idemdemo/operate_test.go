package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
)

// TestOperating runs the demo on bbolt and on Redis, fires a storm, and
// checks that the counters scraped from /metrics equal the storm's outcomes
// exactly; then leaves a key in progress by SIGKILLing the demo mid-request,
// finds it with idemctl get, frees it with idemctl forget, and shows that
// the retry runs.
func TestOperating(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	demo, ctl := buildDemo(t), buildCtl(t)
	srv := redistest.Start(t)
	for name, rawURL := range map[string]string{
		"bolt":  "bolt://" + filepath.Join(t.TempDir(), "demo.db"),
		"redis": "redis://" + srv.Addr() + "/4?prefix=operate:",
	} {
		t.Run(name, func(t *testing.T) {
			args := []string{"-addr", "127.0.0.1:0", "-store", rawURL, "-log-level", "warn", "-lease", "1m"}
			p := startDemo(t, demo, args...)
			results, err := storm(context.Background(), stormConfig{baseURL: p.url, copies: 10, users: 3})
			require.NoError(t, err)
			require.NoError(t, checkStormResults(results))
			checkMetricsEqualStorm(t, p.url, results)

			// A request in flight when the process dies leaves its key in
			// progress for the whole lease.
			c := &http.Client{Timeout: 30 * time.Second}
			admitted := scrapeOutcomes(t, p.url)["do/admitted"]
			go func() { _, _ = c.Do(metricsOrderRequest(p.url, "carol", "stuck-1", "5s")) }()
			require.Eventually(t, func() bool { return scrapeOutcomes(t, p.url)["do/admitted"] == admitted+1 },
				10*time.Second, 20*time.Millisecond, "the slow request was never admitted")
			p.kill()

			get := []string{"-store", rawURL, "get", "-scope", "carol", "http:stuck-1"}
			out, code := runCtl(t, ctl, get...)
			require.Equal(t, 0, code, out)
			require.Contains(t, out, "in_progress")
			require.NotContains(t, out, "carol")
			out, code = runCtl(t, ctl, "-store", rawURL, "forget", "-scope", "carol", "http:stuck-1")
			require.Equal(t, 0, code, out)
			_, code = runCtl(t, ctl, get...)
			require.Equal(t, 3, code, "a forgotten key is not found")

			p = startDemo(t, demo, args...)
			resp, err := c.Do(metricsOrderRequest(p.url, "carol", "stuck-1", ""))
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusCreated, resp.StatusCode, "the retry runs at once")
			require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
			p.kill()
		})
	}
}

func metricsOrderRequest(base, user, key, delay string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader(`{"sku":"book","qty":1}`))
	req.Header.Set(userHeader, user)
	req.Header.Set("Idempotency-Key", key)
	if delay != "" {
		req.Header.Set(delayHeader, delay)
	}
	return req
}

// checkMetricsEqualStorm scrapes /metrics and compares idemkit's outcome
// counters with what the storm's clients saw.
func checkMetricsEqualStorm(t *testing.T, base string, results []stormResult) {
	t.Helper()
	got := scrapeOutcomes(t, base)
	want := map[string]int{}
	for _, r := range results {
		switch r.mode {
		case "idempotency-key":
			want["do/admitted"] += r.fresh
			want["do/completed"] += r.fresh
			want["do/replayed"] += r.replays
			want["do/in_progress"] += r.conflicts
		case "window":
			want["guard/admitted"] += r.fresh
			want["guard/duplicate"] += r.conflicts
		case "token":
			want["token/token_issued"] += r.submissions
			want["token/admitted"] += r.fresh
			want["token/completed"] += r.fresh
			want["token/replayed"] += r.replays
			want["token/in_progress"] += r.conflicts
		}
	}
	for k, v := range want {
		if v == 0 {
			delete(want, k)
		}
	}
	require.Equal(t, want, got, "scraped idemkit_outcomes_total vs the storm's outcomes")
	t.Logf("/metrics after the storm: %v", got)
}

var outcomeLine = regexp.MustCompile(`^idemkit_outcomes_total\{(.*)\} (\d+)$`)

// scrapeOutcomes returns idemkit_outcomes_total by "mode/outcome".
func scrapeOutcomes(t *testing.T, base string) map[string]int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := outcomeLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(m[1], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		n, _ := strconv.Atoi(m[2])
		got[labels["idemkit_mode"]+"/"+labels["idemkit_outcome"]] += n
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, got, "no idemkit_outcomes_total in /metrics")
	return got
}

func buildCtl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "idemctl")
	out, err := exec.Command("go", "build", "-o", bin, "../idemctl").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func runCtl(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	require.NoError(t, err, "%s", out)
	return fmt.Sprint(string(out)), 0
}
