package idemfiber_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfiber"
)

const userHeader = "X-User-Id"

// orders is the handler under test: it counts runs and answers 201 with
// a body naming the run, or what status says.
type orders struct {
	runs    atomic.Int64
	status  atomic.Int64  // 0 means 201
	release chan struct{} // when set, each run waits for it
	fail    atomic.Bool   // return an error instead of answering
	work    time.Duration // each run sleeps this long, standing for a database write
}

func (o *orders) handle(c fiber.Ctx) error {
	n := o.runs.Add(1)
	if o.release != nil {
		<-o.release
	}
	time.Sleep(o.work)
	if o.fail.Load() {
		return errors.New("handler failed")
	}
	status := int(o.status.Load())
	if status == 0 {
		status = http.StatusCreated
	}
	c.Set("Location", "/orders/"+strconv.FormatInt(n, 10))
	c.Set("X-Not-Replayed", "yes")
	c.Set("Content-Type", "application/json")
	return c.Status(status).SendString(`{"id":` + strconv.FormatInt(n, 10) + `}`)
}

// serve starts a Fiber app on a loopback port with POST and PUT
// /orders/:id guarded by New(e, opts...) and returns its base URL.
func serve(t testing.TB, e *idemkit.Engine, o *orders, opts ...idemfiber.Option) string {
	t.Helper()
	opts = append([]idemfiber.Option{idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader))}, opts...)
	guard, err := idemfiber.New(e, opts...)
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New()
	app.Post("/orders/:id", guard, o.handle)
	app.Put("/orders/:id", guard, o.handle)
	return listen(t, app)
}

// listen serves app on a free loopback port until the test ends.
func listen(t testing.TB, app *fiber.App) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true}) }()
	t.Cleanup(func() {
		client.CloseIdleConnections() // Fiber's shutdown waits for open connections
		_ = app.Shutdown()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// answer is what a client saw.
type answer struct {
	status int
	header http.Header
	body   string
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128}}

// send posts body to url with the given headers (name, value pairs; a
// name may repeat).
func send(t testing.TB, method, url, body string, headers ...string) answer {
	t.Helper()
	a, err := trySend(method, url, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func trySend(method, url, body string, headers ...string) (answer, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// as returns the headers of a request by user with key.
func as(user, key string) []string {
	return []string{userHeader, user, idemfiber.DefaultKeyHeader, key}
}

func (a answer) String() string { return fmt.Sprintf("%d %v %s", a.status, a.header, a.body) }
