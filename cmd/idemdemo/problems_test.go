package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// Every problem type URI the demo answers with resolves, on the demo, to a
// page that names the type and says what a client should do: idemhttp's
// types under /problems/ and the demo's own under /problems/demo/. Unknown
// names are 404.
func TestProblemTypePages(t *testing.T) {
	a := newTestApp(t, testkit.NewMem(t), time.Second)
	page := func(path string) (int, string) {
		w := a.get(path, "")
		return w.Code, w.Body.String()
	}
	types := idemhttp.ProblemTypes()
	require.NotEmpty(t, types)
	for _, pt := range types {
		uri := idemhttp.DefaultProblemBase + pt.Name
		require.True(t, strings.HasPrefix(uri, "https://idemkit.dev/problems/"))
		code, body := page(strings.TrimPrefix(uri, "https://idemkit.dev"))
		if !assert.Equal(t, http.StatusOK, code, pt.Name) {
			continue
		}
		assert.Contains(t, body, htmlText(pt.Title), pt.Name)
		assert.Contains(t, body, strconv.Itoa(pt.Status), pt.Name)
		assert.Contains(t, body, htmlText(pt.Description), pt.Name)
	}
	for _, uri := range []string{problemInvalidBody, problemInvalidHook, problemKeyReused, problemOrdersFull, problemDemoFailure, problemInternal, problemCancelled,
		problemPaymentsOff, problemPaymentFailed, problemCrashHooksOff, problemStaleFence, problemMalformedFence} {
		code, body := page(strings.TrimPrefix(uri, "https://idemkit.dev"))
		assert.Equal(t, http.StatusOK, code, uri)
		assert.Contains(t, body, "What to do", uri)
	}
	w := a.get("/problems/key-missing", "")
	assert.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	for _, path := range []string{"/problems/no-such-type", "/problems/demo/no-such-type", "/problems/", "/problems/demo/key-missing"} {
		code, _ := page(path)
		assert.Equal(t, http.StatusNotFound, code, path)
	}
}

// htmlText is s as html/template escapes it in text.
func htmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "'", "&#39;", "<", "&lt;", ">", "&gt;", `"`, "&#34;").Replace(s)
}
