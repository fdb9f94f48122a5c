// Command idemtour walks through idemkit's three modes on the in-process
// memory store and prints what happens at each step: a double-clicked
// submit stopped by a dedup window, a one-time token accepted once, and a
// payment retried after a lost response that runs once and replays.
//
//	go run ./cmd/idemtour
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

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
	"github.com/idemkit/idemkit/store/memstore"
)

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// cli parses args (only -h is known) and runs the tour. It returns the
// exit status: 0, 2 for a usage error (or -h asked for help: 0), 1 when
// the tour failed.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("idemtour", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: idemtour\n\nWalks through idemkit's three modes on the in-process memory store\nand prints what happens at each step. It takes no flags or arguments.")
	}
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
	if err := run(ctx, stdout); err != nil {
		fmt.Fprintln(stderr, "idemtour:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, w io.Writer) error {
	s, err := memstore.New()
	if err != nil {
		return err
	}
	defer s.Close()
	e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithWindow(3*time.Second))
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
	fp := new(keying.Fingerprinter).Sum("user-1", "POST /orders", nil,
		[]byte(`{"sku":"A1","qty":1,"timestamp":1732900000}`))
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
