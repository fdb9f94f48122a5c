package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

const optionsConfig = `
[principal]
source = "header"
header = "X-User"
[[route]]
match = "POST /tokens"
mode = "issue-token"
[[route]]
match = "POST /form"
mode = "token"
token_field = "idem_token"
[[route]]
match = "POST /orders"
mode = "key"
payload_window = "1m"
[[route]]
match = "POST /stream/terminal"
mode = "key"
[[route]]
match = "POST /stream/release"
mode = "key"
unstored = "release"
`

func TestTokenFromAFormField(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, optionsConfig, us.URL, "mem://"))
	res, b := send(t, srv.URL+"/tokens", "POST", "alice", "", "")
	wantStatus(t, res, b, http.StatusCreated)
	var tok idemhttp.IssuedToken
	if err := json.Unmarshal(b, &tok); err != nil {
		t.Fatal(err)
	}
	form := "idem_token=" + tok.Token + "&qty=1"
	res, b1 := send(t, srv.URL+"/form", "POST", "alice", "", form, "Content-Type", "application/x-www-form-urlencoded")
	wantStatus(t, res, b1, http.StatusCreated)
	if !strings.Contains(string(b1), "qty=1") {
		t.Fatalf("the upstream did not get the form intact: %s", b1)
	}
	res, b2 := send(t, srv.URL+"/form", "POST", "alice", "", form, "Content-Type", "application/x-www-form-urlencoded")
	wantStatus(t, res, b2, http.StatusCreated)
	if string(b1) != string(b2) || up.count("/form") != 1 {
		t.Fatalf("form resubmitted: %s vs %s, upstream runs %d", b2, b1, up.count("/form"))
	}
}

func TestPayloadWindowRefusesTheSamePayloadUnderANewKey(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, optionsConfig, us.URL, "mem://"))
	res, b := send(t, srv.URL+"/orders", "POST", "alice", "click-1", `{"sku":"a"}`)
	wantStatus(t, res, b, http.StatusCreated)
	res, b = send(t, srv.URL+"/orders", "POST", "alice", "click-2", `{"sku":"a"}`)
	wantStatus(t, res, b, http.StatusConflict)
	res, b = send(t, srv.URL+"/orders", "POST", "alice", "click-1", `{"sku":"a"}`)
	wantStatus(t, res, b, http.StatusCreated)
	if up.count("/orders") != 1 {
		t.Fatalf("upstream runs %d, want 1", up.count("/orders"))
	}
}

func TestStreamedResponsesKeepATerminalRecordOrRelease(t *testing.T) {
	up, us := newGoUpstream(t)
	close(up.release) // stream both events at once
	srv, p := startProxy(t, parseConfig(t, optionsConfig, us.URL, "mem://"))
	for _, tc := range []struct {
		path string
		runs int64
		code int
	}{{"/stream/terminal", 1, http.StatusInternalServerError}, {"/stream/release", 2, http.StatusOK}} {
		res, b := send(t, srv.URL+tc.path, "POST", "alice", tc.path, `{}`, "X-Stream", "1")
		wantStatus(t, res, b, http.StatusOK)
		if !strings.Contains(string(b), "data: two") {
			t.Fatalf("%s: stream %q", tc.path, b)
		}
		res, b = send(t, srv.URL+tc.path, "POST", "alice", tc.path, `{}`, "X-Stream", "1")
		wantStatus(t, res, b, tc.code)
		if up.count(tc.path) != tc.runs {
			t.Fatalf("%s: upstream runs %d, want %d", tc.path, up.count(tc.path), tc.runs)
		}
	}
	if p.streams.Load() != 3 {
		t.Fatalf("streams counted %d, want 3", p.streams.Load())
	}
}
