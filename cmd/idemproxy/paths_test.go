package main

import (
	"net/http"
	"testing"
)

// TestPathVariantsShareTheRoute: upstreams route many spellings of a path
// to one handler (Express: any case and a trailing slash; Tomcat and
// Spring: ;parameters). Each spelling of /orders is guarded by the
// /orders route and shares its key's record, so a retry under any of them
// is a replay; spellings that servers read in different ways (an encoded
// slash or semicolon, dot segments, ..;) get 400 and reach no upstream.
func TestPathVariantsShareTheRoute(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, baseConfig+`
[[route]]
match = "POST /files/{path...}"
mode = "key"
`, us.URL, "mem://"))
	res, first := send(t, srv.URL+"/orders", "POST", "alice", "k", `{}`)
	wantStatus(t, res, first, http.StatusCreated)
	for _, path := range []string{"/orders/", "/Orders", "/ORDERS", "/orders;jsessionid=1", "//orders", "/%6Frders",
		"/Orders;a=b/"} {
		res, b := send(t, srv.URL+path, "POST", "alice", "k", `{}`)
		if res.StatusCode != http.StatusCreated || res.Header.Get("Idempotent-Replayed") != "true" || string(b) != string(first) {
			t.Errorf("%s: %d %s replayed %q, want the replay of /orders", path, res.StatusCode, b, res.Header.Get("Idempotent-Replayed"))
		}
		// Without a key it is guarded too.
		res, b = send(t, srv.URL+path, "POST", "alice", "", `{}`)
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s without a key: %d %s, want 400", path, res.StatusCode, b)
		}
	}
	for _, path := range []string{"/orders%2F", "/orders%2f", "/orders/..;/orders", "/orders/../orders", "/./orders",
		"/x/%2e%2e/orders", "/orders%3Bx", "/orders%5C", "/x\\..\\orders", "/files/a/../../orders", "/orders/.;/"} {
		res, b := send(t, srv.URL+path, "POST", "alice", "k", `{}`)
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", path, res.StatusCode, b)
		}
	}
	if n := up.runs.Load(); n != 1 {
		t.Fatalf("upstream runs %d, want 1", n)
	}
	// The upstream gets the path as the client sent it.
	res, b := send(t, srv.URL+"/Files/A;v=1/b/", "POST", "alice", "f", `{}`)
	wantStatus(t, res, b, http.StatusCreated)
	res, b = send(t, srv.URL+"/files", "POST", "alice", "g", `{}`)
	wantStatus(t, res, b, http.StatusCreated)
	if up.count("/Files/A;v=1/b/") != 1 || up.count("/files") != 1 {
		t.Fatalf("upstream paths: /Files/A;v=1/b/ %d, /files %d; want 1 and 1", up.count("/Files/A;v=1/b/"), up.count("/files"))
	}
	res, b = send(t, srv.URL+"/files/a/b", "POST", "alice", "f", `{}`)
	if res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("/files/a/b with the key of /Files/A;v=1/b/: %d %s, want a replay", res.StatusCode, b)
	}
}

// TestCaseSensitivePaths: with case_sensitive_paths, for an upstream that
// routes /Orders elsewhere, only /orders is the route's; the other
// normalisations still hold.
func TestCaseSensitivePaths(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, "case_sensitive_paths = true\n"+baseConfig, us.URL, "mem://"))
	res, b := send(t, srv.URL+"/orders", "POST", "alice", "k", `{}`)
	wantStatus(t, res, b, http.StatusCreated)
	res, b = send(t, srv.URL+"/orders/", "POST", "alice", "k", `{}`)
	if res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("/orders/: %d %s, want a replay", res.StatusCode, b)
	}
	res, b = send(t, srv.URL+"/Orders", "POST", "alice", "", `{}`) // not a route: forwarded as it is
	wantStatus(t, res, b, http.StatusCreated)
	if up.count("/orders") != 1 || up.count("/Orders") != 1 {
		t.Fatalf("upstream /orders %d, /Orders %d; want 1 and 1", up.count("/orders"), up.count("/Orders"))
	}
}

// TestRoutePathsMustNotEndInASlash: request paths are matched without a
// trailing slash, so a route whose path ends in one could never match.
func TestRoutePathsMustNotEndInASlash(t *testing.T) {
	for _, match := range []string{"POST /orders/", "POST /orders/{$}"} {
		c := defaults()
		c.Upstream = "http://127.0.0.1:9000"
		c.Principal = principalCfg{Source: sourceHeader, Header: "X-User"}
		c.Routes = []routeCfg{{Match: match, Mode: modeKey}}
		if err := c.check(); err == nil {
			t.Errorf("%s accepted", match)
		}
	}
}
