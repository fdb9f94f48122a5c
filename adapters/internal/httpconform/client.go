package httpconform

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// Body is the request body of every test: a JSON order.
const Body = `{"sku":"book-42","qty":1}`

// Answer is what a client saw.
type Answer struct {
	Status int
	Header http.Header
	Body   string
}

func (a Answer) String() string { return fmt.Sprintf("%d %v %s", a.Status, a.Header, a.Body) }

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128}}

// Send sends body to url with headers (name, value pairs; a name may
// repeat) and fails t when the exchange fails.
func Send(t testing.TB, method, url, body string, headers ...string) Answer {
	t.Helper()
	a, err := TrySend(method, url, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TrySend is Send returning the error.
func TrySend(method, url, body string, headers ...string) (Answer, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{}, err
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}, nil
}

// As returns the headers of a request by user with idempotency key.
func As(user, key string) []string {
	return []string{UserHeader, user, httpcore.DefaultKeyHeader, key}
}

// WithToken returns the headers of a request by user with token.
func WithToken(user, token string) []string {
	return []string{UserHeader, user, httpcore.DefaultTokenHeader, token}
}

// CheckProblem checks that a is a problem+json answer of status and type
// typ, with Cache-Control: no-store, that quotes none of secrets.
func CheckProblem(t testing.TB, a Answer, status int, typ string, secrets ...string) {
	t.Helper()
	if a.Status != status || a.Header.Get("Content-Type") != httpcore.ProblemContentType {
		t.Fatalf("got %v, want %d problem+json", a, status)
	}
	var p httpcore.Problem
	if err := json.Unmarshal([]byte(a.Body), &p); err != nil {
		t.Fatalf("body %q: %v", a.Body, err)
	}
	if p.Type != typ || p.Status != status || p.Title == "" {
		t.Errorf("problem %+v, want type %s status %d", p, typ, status)
	}
	if a.Header.Get("Cache-Control") != "no-store" {
		t.Error("problem without Cache-Control: no-store")
	}
	for _, s := range append(secrets, "alice") {
		if strings.Contains(a.Body, s) {
			t.Errorf("problem quotes %q: %s", s, a.Body)
		}
	}
}
