package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// Bounds of a storm: it is a demonstration, not a load generator.
const (
	maxStormCopies   = 500
	maxStormUsers    = 50
	maxStormInFlight = 1000             // copies × users: requests in flight at once
	stormTimeout     = 2 * time.Minute  // the whole storm
	stormCallTimeout = 30 * time.Second // one request
)

// stormConfig says what a storm sends, and where.
type stormConfig struct {
	baseURL string // the service, such as http://127.0.0.1:8080
	copies  int    // concurrent copies of each logical submission (-n)
	users   int    // users, each with one logical submission per mode
	// runID makes this storm's users and SKUs its own, so that storms
	// against one server never count each other's orders.
	runID string
	// header is added to every submission (tests add test hooks).
	header http.Header
	// observe, when set, sees every response (tests use it to learn which
	// submissions completed). It must be safe for concurrent use.
	observe func(submission, outcome)
	client  *http.Client
}

// stormMode is one way of submitting: a route, and how a logical
// submission is made unique to the server.
type stormMode struct {
	name string
	path string
	// prepare returns the headers shared by every copy of a submission.
	prepare func(ctx context.Context, sc stormConfig, user string) (http.Header, error)
}

// stormModes are the three modes, in the order the storm runs them.
var stormModes = []stormMode{
	{"idempotency-key", "/orders", keyHeaders},
	{"window", "/orders/quick", noHeaders},
	{"token", "/orders/form", tokenHeaders},
}

// submission is one logical submission, sent many times.
type submission struct {
	mode   string
	path   string
	user   string
	sku    string
	header http.Header
	body   []byte
}

// outcome is what one copy of a submission got.
type outcome struct {
	status   int // 0 for a transport error
	replayed bool
	body     []byte
	latency  time.Duration
	err      error
}

// stormResult is the tally of one mode.
type stormResult struct {
	mode        string
	submissions int
	sent        int
	orders      int // orders of the mode's submissions, counted with GET /orders
	fresh       int // 201 without Idempotent-Replayed
	replays     int
	conflicts   int // 409
	rejections  int // other 4xx
	errors      int // 5xx and transport errors
	p50, p99    time.Duration
	// wrong counts the submissions that did not make exactly one order;
	// reruns those whose handler answered more than one fresh 201 (the
	// idempotency layer let copies through, even if the order
	// repository's unique index then kept a single order).
	wrong, reruns int
}

// ok reports whether every submission of the mode created exactly one
// order, and ran its handler at most once. Each submission is checked on
// its own: a duplicate for one cannot hide behind a missing order for
// another.
func (r stormResult) ok() bool {
	return r.submissions > 0 && r.wrong == 0 && r.reruns == 0 && r.orders == r.submissions
}

// runStorm is the storm subcommand.
func runStorm(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sc, storeURL, err := parseStormFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, stormTimeout)
	defer cancel()
	if sc.baseURL == "" {
		stop, err := startStormServer(ctx, &sc, storeURL, stdout, stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	fmt.Fprintf(stdout, "storm: %d users x %d concurrent copies of one submission per mode, at %s\n\n",
		sc.users, sc.copies, sc.baseURL)
	results, err := storm(ctx, sc)
	printStormResults(stdout, results)
	if err != nil {
		return err
	}
	return checkStormResults(results)
}

// parseStormFlags parses the storm's flags.
func parseStormFlags(args []string, stderr io.Writer) (stormConfig, string, error) {
	sc := stormConfig{copies: 50, users: 5}
	storeURL := ""
	fs := flag.NewFlagSet("idemdemo storm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage:\n  idemdemo storm [flags]\n\nSends -n concurrent copies of one submission per user to each mode and\ncounts the orders they made: exactly one per submission is expected.\n\nWithout -url it starts its own server over -store, or a temporary bbolt\nfile: IDEMKIT_STORE and the other IDEMKIT_* variables are ignored, so a\nstorm never writes into the store a service uses.\n\nFlags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&sc.baseURL, "url", "", "`URL` of a running idemdemo on a loopback address (default: start one in-process)")
	fs.IntVar(&sc.copies, "n", sc.copies, fmt.Sprintf("concurrent copies of each submission (1 to %d)", maxStormCopies))
	fs.IntVar(&sc.users, "users", sc.users, fmt.Sprintf("users, each with one submission per mode (1 to %d)", maxStormUsers))
	fs.StringVar(&storeURL, "store", "", "store `URL` of the in-process server, such as mem:// or redis://host:6379 (default: a temporary bbolt file; IDEMKIT_STORE is ignored)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return sc, "", err
		}
		return sc, "", fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := checkStormConfig(sc, fs.Args()); err != nil {
		fmt.Fprintln(stderr, err)
		fs.Usage()
		return sc, "", fmt.Errorf("%w: %w", errUsage, err)
	}
	return sc, storeURL, nil
}

// checkStormConfig keeps a storm bounded and on the loopback.
func checkStormConfig(sc stormConfig, rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q", rest[0])
	case sc.copies < 1 || sc.copies > maxStormCopies:
		return fmt.Errorf("-n %d: must be between 1 and %d", sc.copies, maxStormCopies)
	case sc.users < 1 || sc.users > maxStormUsers:
		return fmt.Errorf("-users %d: must be between 1 and %d", sc.users, maxStormUsers)
	case sc.copies*sc.users > maxStormInFlight:
		return fmt.Errorf("-n %d × -users %d: at most %d requests in flight", sc.copies, sc.users, maxStormInFlight)
	case sc.baseURL != "":
		return checkLoopbackURL(sc.baseURL)
	}
	return nil
}

// checkLoopbackURL accepts only http URLs of loopback hosts: a storm is
// meant for a local demo server.
func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("-url: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("-url %q: must be http://HOST:PORT", raw)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-url %q: the storm only targets loopback addresses", raw)
	}
	return nil
}

// startStormServer starts an order service on a free loopback port over
// the store at storeURL, or a temporary bbolt file when it is empty, and
// points sc at it. stop shuts it down and removes the temporary file.
func startStormServer(ctx context.Context, sc *stormConfig, storeURL string, stdout, stderr io.Writer) (stop func(), err error) {
	dir, err := os.MkdirTemp("", "idemdemo-storm-")
	if err != nil {
		return nil, err
	}
	cfg := defaultConfig()
	cfg.addr, cfg.stack.Store = "127.0.0.1:0", storeURL
	if storeURL == "" {
		cfg.stack.Store = "bolt://" + filepath.Join(dir, "storm.db")
	}
	svc, err := start(ctx, cfg, newLogger(stderr, slog.LevelWarn))
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	fmt.Fprintf(stdout, "in-process server at %s, store: %s\n", svc.url, svc.backend.describe())
	sc.baseURL = svc.url
	return func() {
		if err := errors.Join(svc.shutdown(shutdownTimeout), os.RemoveAll(dir)); err != nil {
			fmt.Fprintln(stderr, "idemdemo storm: stopping the server:", err)
		}
	}, nil
}

// storm runs every mode in turn and returns a result per mode. It stops at
// the first error that keeps it from counting orders.
func storm(ctx context.Context, sc stormConfig) ([]stormResult, error) {
	if sc.runID == "" {
		sc.runID = newRunID()
	}
	if sc.client == nil {
		sc.client = newStormClient(sc.copies * sc.users)
		defer sc.client.CloseIdleConnections()
	}
	var results []stormResult
	for _, m := range stormModes {
		r, err := stormOneMode(ctx, sc, m)
		if err != nil {
			return results, fmt.Errorf("%s: %w", m.name, err)
		}
		results = append(results, r)
	}
	return results, nil
}

// stormOneMode sends every user's submission of mode m, copies times at
// once, then counts the orders they made.
func stormOneMode(ctx context.Context, sc stormConfig, m stormMode) (stormResult, error) {
	subs, err := prepareSubmissions(ctx, sc, m)
	if err != nil {
		return stormResult{}, err
	}
	perSub := fireAll(ctx, sc, subs)
	r := tally(m.name, slices.Concat(perSub...))
	r.submissions = len(subs)
	for i, sub := range subs {
		n, err := countOrders(ctx, sc, sub.user, sub.sku)
		if err != nil {
			return r, err
		}
		r.orders += n
		if n != 1 {
			r.wrong++
		}
		if countFresh(perSub[i]) > 1 {
			r.reruns++
		}
	}
	return r, nil
}

// countFresh returns how many outcomes are fresh (not replayed) 201s: how
// many copies ran the handler to completion.
func countFresh(outcomes []outcome) int {
	n := 0
	for _, o := range outcomes {
		if o.err == nil && o.status == http.StatusCreated && !o.replayed {
			n++
		}
	}
	return n
}

// prepareSubmissions makes each user's logical submission for mode m.
func prepareSubmissions(ctx context.Context, sc stormConfig, m stormMode) ([]submission, error) {
	subs := make([]submission, 0, sc.users)
	for i := range sc.users {
		user := fmt.Sprintf("storm-%s-user%d", sc.runID, i+1)
		header, err := m.prepare(ctx, sc, user)
		if err != nil {
			return nil, err
		}
		header.Set(userHeader, user)
		for name, vs := range sc.header {
			header[name] = vs
		}
		sku := fmt.Sprintf("storm-%s-%s", sc.runID, m.name)
		body, _ := json.Marshal(orderRequest{SKU: sku, Qty: 1})
		subs = append(subs, submission{mode: m.name, path: m.path, user: user, sku: sku, header: header, body: body})
	}
	return subs, nil
}

// keyHeaders gives a submission its Idempotency-Key.
func keyHeaders(_ context.Context, sc stormConfig, user string) (http.Header, error) {
	h := http.Header{}
	h.Set(idemhttp.DefaultKeyHeader, "order-"+user)
	return h, nil
}

// noHeaders is for the window mode: the body alone makes copies the same.
func noHeaders(context.Context, stormConfig, string) (http.Header, error) {
	return http.Header{}, nil
}

// tokenHeaders issues a token for user (POST /tokens) and gives it to the
// submission.
func tokenHeaders(ctx context.Context, sc stormConfig, user string) (http.Header, error) {
	o := send(ctx, sc.client, sc.baseURL, submission{path: "/tokens", header: http.Header{userHeader: {user}}})
	if o.err != nil || o.status != http.StatusCreated {
		return nil, fmt.Errorf("POST /tokens: status %d: %v %s", o.status, o.err, o.body)
	}
	var tok idemhttp.IssuedToken
	if err := json.Unmarshal(o.body, &tok); err != nil {
		return nil, fmt.Errorf("POST /tokens: %w", err)
	}
	h := http.Header{}
	h.Set(idemhttp.DefaultTokenHeader, tok.Token)
	return h, nil
}

// fireAll sends sc.copies copies of every submission, all released at the
// same moment, and returns the outcomes of each submission's copies
// (outcomes[i] for subs[i]).
func fireAll(ctx context.Context, sc stormConfig, subs []submission) [][]outcome {
	outcomes := make([][]outcome, len(subs))
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i, sub := range subs {
		outcomes[i] = make([]outcome, sc.copies)
		for c := range sc.copies {
			wg.Go(func() {
				<-ready
				o := send(ctx, sc.client, sc.baseURL, sub)
				if sc.observe != nil {
					sc.observe(sub, o)
				}
				outcomes[i][c] = o
			})
		}
	}
	close(ready)
	wg.Wait()
	return outcomes
}

// send POSTs one copy of sub and times it.
func send(ctx context.Context, client *http.Client, baseURL string, sub submission) outcome {
	ctx, cancel := context.WithTimeout(ctx, stormCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+sub.path, bytes.NewReader(sub.body))
	if err != nil {
		return outcome{err: err}
	}
	req.Header = sub.header.Clone()
	req.Header.Set("Content-Type", "application/json")
	began := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return outcome{err: err, latency: time.Since(began)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return outcome{
		status:   resp.StatusCode,
		replayed: resp.Header.Get(idemhttp.ReplayedHeader) == "true",
		body:     body,
		latency:  time.Since(began),
		err:      err,
	}
}

// countOrders returns how many of user's orders have sku.
func countOrders(ctx context.Context, sc stormConfig, user, sku string) (int, error) {
	orders, err := listUserOrders(ctx, sc.client, sc.baseURL, user)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range orders {
		if o.SKU == sku {
			n++
		}
	}
	return n, nil
}

// listUserOrders returns user's orders (GET /orders).
func listUserOrders(ctx context.Context, client *http.Client, baseURL, user string) ([]Order, error) {
	ctx, cancel := context.WithTimeout(ctx, stormCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/orders", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(userHeader, user)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /orders: status %d", resp.StatusCode)
	}
	var orders []Order
	return orders, json.NewDecoder(resp.Body).Decode(&orders)
}

// tally classifies outcomes and computes the latency percentiles.
func tally(mode string, outcomes []outcome) stormResult {
	r := stormResult{mode: mode, sent: len(outcomes)}
	latencies := make([]time.Duration, 0, len(outcomes))
	for _, o := range outcomes {
		latencies = append(latencies, o.latency)
		switch {
		case o.err != nil || o.status >= 500:
			r.errors++
		case o.status == http.StatusCreated && o.replayed:
			r.replays++
		case o.status == http.StatusCreated:
			r.fresh++
		case o.status == http.StatusConflict:
			r.conflicts++
		default:
			r.rejections++
		}
	}
	slices.Sort(latencies)
	r.p50, r.p99 = percentile(latencies, 50), percentile(latencies, 99)
	return r
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n), 1-based
	return sorted[max(rank, 1)-1]
}

// printStormResults prints one row per mode.
func printStormResults(w io.Writer, results []stormResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode           \tsubmissions\tsent\torders\tfresh 201\treplays\t409\tother 4xx\terrors\tp50\tp99\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%-15s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t\n", r.mode, r.submissions, r.sent, r.orders,
			r.fresh, r.replays, r.conflicts, r.rejections, r.errors, roundLatency(r.p50), roundLatency(r.p99))
	}
	_ = tw.Flush()
	for _, r := range results {
		verdict := "ok, one order per submission"
		if !r.ok() {
			verdict = "FAIL, " + r.failure()
		}
		fmt.Fprintf(w, "%s: %s\n", r.mode, verdict)
	}
}

// failure says how a result that is not ok went wrong.
func (r stormResult) failure() string {
	s := fmt.Sprintf("%d orders for %d submissions", r.orders, r.submissions)
	if r.wrong > 0 {
		s += fmt.Sprintf(", %d of them without exactly one order", r.wrong)
	}
	if r.reruns > 0 {
		s += fmt.Sprintf(", %d of them ran the handler more than once", r.reruns)
	}
	return s
}

// roundLatency keeps three significant digits or so.
func roundLatency(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// checkStormResults returns an error unless every mode made exactly one
// order per submission.
func checkStormResults(results []stormResult) error {
	for _, r := range results {
		if !r.ok() {
			return fmt.Errorf("%s mode: %s", r.mode, r.failure())
		}
	}
	return nil
}

// newStormClient returns an HTTP client that keeps a connection per
// concurrent request.
func newStormClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = conns, conns
	return &http.Client{Transport: t, Timeout: stormCallTimeout}
}

// newRunID returns a short random identifier.
func newRunID() string {
	return strings.ToLower(rand.Text()[:8])
}
