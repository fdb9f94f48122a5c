// Command idemtour walks through idemkit's three modes and prints what
// happens at each step: a double-clicked submit stopped by a dedup window,
// a one-time token accepted once, and a payment retried after a lost
// response that runs once and replays.
//
//	go run ./cmd/idemtour                                  # on the in-process memory store
//	go run ./cmd/idemtour -store redis://localhost:6379/0  # on any store, by URL
//
// -store (or IDEMKIT_STORE) takes any store URL package setup knows; each
// run writes under a namespace of its own, so runs over a persistent store
// do not meet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver of mysql://
	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
	"github.com/idemkit/idemkit/setup"
	_ "github.com/idemkit/idemkit/store/boltstore"  // bolt://
	_ "github.com/idemkit/idemkit/store/redisstore" // redis://, rediss://, redis+sentinel://, redis+cluster://
	_ "github.com/idemkit/idemkit/store/sqlstore"   // postgres://, mysql://
	_ "github.com/jackc/pgx/v5/stdlib"              // the driver of postgres://
)

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// cli parses args (-store and -h) and runs the tour. It returns the exit
// status: 0, 2 for a usage error (or -h asked for help: 0), 1 when the
// tour failed (a store URL it cannot use included).
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("idemtour", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: idemtour [-store URL]\n\nWalks through idemkit's three modes and prints what happens at each step.\n\nFlags:")
		fs.PrintDefaults()
	}
	cfg, err := setup.FromEnv(os.Environ())
	if err != nil {
		fmt.Fprintln(stderr, "idemtour:", err)
		return 2
	}
	if cfg.Store == "" {
		cfg.Store = "mem://"
	}
	fs.StringVar(&cfg.Store, "store", cfg.Store, "store `URL`: mem://, bolt:///path/file.db, redis://host:6379/0, ... (or IDEMKIT_STORE)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idemtour: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if err := run(ctx, stdout, cfg); err != nil {
		fmt.Fprintln(stderr, "idemtour:", err)
		return 1
	}
	return 0
}

// run runs the tour over the stack cfg describes.
func run(ctx context.Context, w io.Writer, cfg setup.Config) error {
	st, err := setup.Build(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	e, err := st.NewEngine(idemkit.WithObserver(nil), idemkit.WithWindow(3*time.Second),
		idemkit.WithNamespace(fmt.Sprintf("tour%d", time.Now().UnixNano())))
	if err != nil {
		return err
	}
	for _, step := range []func(context.Context, io.Writer, *idemkit.Engine) error{guardTour, tokenTour, doTour} {
		if err := step(ctx, w, e); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return nil
}

// guardTour: ten concurrent copies of one submit (a double click, a retrying
// gateway) inside a 3 s window; one runs.
func guardTour(ctx context.Context, w io.Writer, e *idemkit.Engine) error {
	fmt.Fprintln(w, "1. Dedup window (Guard): 10 identical submits at once")
	fper, err := keying.NewFingerprinter()
	if err != nil {
		return err
	}
	fp := fper.Sum("user-1", "POST /orders", nil, []byte(`{"sku":"A1","qty":1,"timestamp":1732900000}`))
	var admitted, rejected atomic.Int32
	var retry atomic.Int64
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			err := e.Guard(ctx, fp, func(context.Context) error { admitted.Add(1); return nil })
			if d, ok := idemkit.RetryAfter(err); ok && errors.Is(err, idemkit.ErrDuplicate) {
				rejected.Add(1)
				retry.Store(int64(d))
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(w, "   admitted %d, rejected %d as duplicates (retry after ~%v)\n",
		admitted.Load(), rejected.Load(), time.Duration(retry.Load()).Round(100*time.Millisecond))
	if admitted.Load() != 1 {
		return fmt.Errorf("guard admitted %d submits, want 1", admitted.Load())
	}
	return nil
}

// tokenTour: a form carries a token; the first submit spends it, a resubmit
// gets the same receipt, someone else's copy is refused.
func tokenTour(ctx context.Context, w io.Writer, e *idemkit.Engine) error {
	fmt.Fprintln(w, "2. One-time token: issue, use, reuse, steal")
	tok, err := e.IssueToken(ctx, "user-1")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   issued a token valid for %v\n", tok.ExpiresIn)
	pay := func(context.Context) ([]byte, error) { return []byte("receipt #1001"), nil }
	for _, who := range []string{"user-1", "user-1", "user-2"} {
		res, err := e.UseToken(ctx, who, tok.Value, pay)
		switch {
		case errors.Is(err, idemkit.ErrTokenInvalid):
			fmt.Fprintf(w, "   %s: refused (%v)\n", who, err)
		case err != nil:
			return err
		default:
			fmt.Fprintf(w, "   %s: %s (replayed=%v)\n", who, res.Value, res.Replayed)
		}
	}
	return nil
}

// doTour: a payment whose response is lost is retried three times by the
// client; the card is charged once and every retry gets the same answer.
func doTour(ctx context.Context, w io.Writer, e *idemkit.Engine) error {
	fmt.Fprintln(w, "3. Idempotency key (Do): a payment retried after a lost response")
	charges := 0
	charge := func(context.Context) ([]byte, error) {
		charges++
		return fmt.Appendf(nil, `{"charge":"ch_%d","amount":1200}`, charges), nil
	}
	key := keying.Key("user-1", "pay", "client-key-7f3a")
	for attempt := 1; attempt <= 3; attempt++ {
		res, err := e.Do(ctx, key, "amount=1200", charge)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "   attempt %d: %s (replayed=%v)\n", attempt, res.Value, res.Replayed)
	}
	_, err := e.Do(ctx, key, "amount=9900", charge)
	fmt.Fprintf(w, "   same key, different amount: %v\n", err)
	fmt.Fprintf(w, "   the card was charged %d time(s)\n", charges)
	if charges != 1 || !errors.Is(err, idemkit.ErrMismatch) {
		return fmt.Errorf("charged %d times, mismatch error %v", charges, err)
	}
	return nil
}
