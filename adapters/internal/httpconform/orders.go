package httpconform

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
)

// UserHeader is the request header the framework's principal function
// reads (a trusted header, in these tests).
const UserHeader = "X-User-Id"

// Orders is the behaviour of the handler under test, which each framework
// writes in its own terms: it calls Run and answers what Run returns, with
// the Location header it names, X-Not-Replayed: yes (off the replay
// allow-list), Content-Type application/json and the body.
type Orders struct {
	runs    atomic.Int64
	status  atomic.Int64  // 0 means 201
	fail    atomic.Bool   // fail as the framework fails (an error, an abort)
	big     atomic.Int64  // when set, the body is padded to this many bytes
	release chan struct{} // when set, each run waits for it
	once    sync.Once     // closes release
}

// Reply is what one run of the handler answers.
type Reply struct {
	Status   int
	Location string
	Body     string
	// Fail says the handler fails instead: gin aborts with 500, Echo
	// returns an error.
	Fail bool
}

// Run counts a run, waits when the test holds the handler, and returns
// what to answer.
func (o *Orders) Run() Reply {
	n := o.runs.Add(1)
	if o.release != nil {
		<-o.release
	}
	if o.fail.Load() {
		return Reply{Fail: true}
	}
	status := int(o.status.Load())
	if status == 0 {
		status = 201
	}
	id := strconv.FormatInt(n, 10)
	body := `{"id":` + id + `,"at":"` + time.Unix(n, 0).UTC().Format(time.RFC3339) + `"}`
	if big := int(o.big.Load()); big > len(body) {
		head := `{"id":` + id + `,"pad":"`
		body = head + strings.Repeat("x", max(big-len(head)-2, 0)) + `"}`
	}
	return Reply{Status: status, Location: "/orders/" + id, Body: body}
}

// Hold makes every later run wait until Unhold.
func (o *Orders) Hold() {
	o.release = make(chan struct{})
	o.once = sync.Once{}
}

// Unhold lets held runs go on; it may be called more than once (also from
// t.Cleanup, before the server closes).
func (o *Orders) Unhold() { o.once.Do(func() { close(o.release) }) }

// Runs returns the number of runs so far.
func (o *Orders) Runs() int64 { return o.runs.Load() }

// Mode names the adapter's constructor a Framework serves.
type Mode uint8

// The modes.
const (
	Idempotency Mode = iota + 1
	Window
	Token
)

// Config is what a test asks of the middleware; the Framework turns it
// into its own options, beside the principal read from UserHeader.
type Config struct {
	Mode Mode
	// MaxStored, when positive, is WithMaxStoredResponse.
	MaxStored int
	// MaxBody, when positive, is WithMaxBody.
	MaxBody int64
	// OptionalKey is WithOptionalKey.
	OptionalKey bool
	// Logger, when set, is WithLogger.
	Logger *slog.Logger
	// Engine holds WithEngineOptions' options.
	Engine []idemkit.Option
	// Query, when QuerySet, is WithQueryParams(Query...).
	Query    []string
	QuerySet bool
	// Fingerprinter, when set, is WithFingerprinter.
	Fingerprinter *keying.Fingerprinter
	// ReplayHeader, when set, is WithReplayHeader.
	ReplayHeader string
	// Release is WithUnstored(ReleaseKey, ReleaseKey).
	Release bool
	// ProblemBase, when set, is WithProblemBase.
	ProblemBase string
	// Wait, when positive, is WithWait(Wait).
	Wait time.Duration
}

// Framework serves o behind the adapter's middleware for cfg on a loopback
// port, with POST and PUT /orders/:id routed to it (the route pattern the
// framework's way), until the test ends, and returns the base URL. The
// principal comes from UserHeader (trusted, absent, empty or repeated: no
// principal).
type Framework func(t testing.TB, e *idemkit.Engine, o *Orders, cfg Config) string
