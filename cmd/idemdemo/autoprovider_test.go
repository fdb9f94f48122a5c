package main

import (
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var providerStarted = regexp.MustCompile(`payment provider started.*url=(http://\S+)`)

// With -provider auto the demo starts its own payment provider, a process
// of its own on a free loopback port, places a paid order through it, and
// stops it when it shuts down.
func TestAutoProviderStartsAndStops(t *testing.T) {
	bin := buildDemo(t)
	p := startDemo(t, bin, "-addr", "127.0.0.1:0", "-store", "mem://", "-provider", "auto", "-log-level", "info")
	c := &http.Client{Timeout: 10 * time.Second}
	a := postPaid(c, p.url, "alice", "order-1")
	require.NoError(t, a.err)
	require.Equal(t, http.StatusCreated, a.r.status, "%s", a.r.body)
	assert.Contains(t, string(a.r.body), `"status":"paid"`)

	m := providerStarted.FindStringSubmatch(p.stderr.String())
	require.NotNil(t, m, "no provider URL in the log:\n%s", p.stderr)
	stats := providerStats(t, c, m[1])
	assert.Equal(t, 1, stats.Charges)

	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the demo did not stop")
	}
	_, err := c.Get(m[1] + "/healthz")
	assert.Error(t, err, "the provider outlived the demo")
}
