package idemkit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// A mode-specific option given to a call that does not use it is refused
// with ErrInvalid naming it, instead of being ignored; given to New or
// With, it applies to the calls that use it.
func TestCallsRefuseOptionsOfOtherModes(t *testing.T) {
	ctx := context.Background()
	e := testkit.NewEngine(t, idemkit.WithWindow(time.Minute), idemkit.WithWait(0), idemkit.WithTokenTTL(time.Minute))
	view, err := e.With(idemkit.WithRelease(idemkit.ReleaseOnDone), idemkit.WithLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context) ([]byte, error) { return []byte("ok"), nil }
	n := 0
	key := func() string { n++; return fmt.Sprint("k", n) }
	calls := map[string]func(opt idemkit.Option) error{
		"Guard": func(opt idemkit.Option) error {
			return view.Guard(ctx, key(), func(context.Context) error { return nil }, opt)
		},
		"Do": func(opt idemkit.Option) error { _, err := view.Do(ctx, key(), "", noop, opt); return err },
		"Begin": func(opt idemkit.Option) error {
			c, _, err := view.Begin(ctx, key(), "", opt)
			if c != nil {
				c.Release(ctx)
			}
			return err
		},
		"BeginBatch": func(opt idemkit.Option) error {
			_, err := view.BeginBatch(ctx, []idemkit.BatchRequest{{Key: key()}}, opt)
			return err
		},
		"IssueToken": func(opt idemkit.Option) error { _, err := view.IssueToken(ctx, "alice", opt); return err },
		"Inspect": func(opt idemkit.Option) error {
			_, err := view.Inspect(ctx, idemkit.ModeDo, "absent", opt)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		},
		"UseToken": func(opt idemkit.Option) error {
			tok, err := view.IssueToken(ctx, "alice")
			if err != nil {
				return err
			}
			_, err = view.UseToken(ctx, "alice", tok.Value, noop, opt)
			return err
		},
	}
	options := map[string]idemkit.Option{
		"WithWindow":        idemkit.WithWindow(time.Second),
		"WithRelease":       idemkit.WithRelease(idemkit.ReleaseOnError),
		"WithLease":         idemkit.WithLease(time.Second),
		"WithHeartbeat":     idemkit.WithHeartbeat(time.Millisecond * 100),
		"WithoutHeartbeat":  idemkit.WithoutHeartbeat(),
		"WithRetention":     idemkit.WithRetention(time.Hour),
		"WithTokenTTL":      idemkit.WithTokenTTL(time.Minute),
		"WithMaxResultSize": idemkit.WithMaxResultSize(1024),
		"WithOversized":     idemkit.WithOversized(idemkit.ReleaseKey),
		"WithWait":          idemkit.WithWait(0),
		"WithErrorCodec":    idemkit.WithErrorCodec(nil),
		"WithCodec":         idemkit.WithCodec(idemkit.JSON),
	}
	doLike := []string{"WithLease", "WithHeartbeat", "WithoutHeartbeat", "WithRetention", "WithMaxResultSize", "WithOversized", "WithWait", "WithErrorCodec", "WithCodec"}
	takes := map[string][]string{
		"Guard": {"WithWindow", "WithRelease"},
		"Do":    doLike,
		"Begin": doLike[:len(doLike)-1], // not WithCodec
		"BeginBatch": slices.DeleteFunc(slices.Clone(doLike[:len(doLike)-1]), // nor WithWait
			func(o string) bool { return o == "WithWait" }),
		"Inspect":    nil,
		"IssueToken": {"WithTokenTTL"},
		"UseToken":   append([]string{"WithTokenTTL"}, doLike...),
	}
	for call, run := range calls {
		for name, opt := range options {
			err := run(opt)
			allowed := false
			for _, a := range takes[call] {
				allowed = allowed || a == name
			}
			switch {
			case allowed && err != nil:
				t.Errorf("%s(%s) = %v, want it taken", call, name, err)
			case !allowed && (!errors.Is(err, idemkit.ErrInvalid) || !strings.Contains(err.Error(), strings.TrimPrefix(name, "Without")) || !strings.Contains(err.Error(), call)):
				t.Errorf("%s(%s) = %v, want ErrInvalid naming the option and the call", call, name, err)
			}
		}
		if err := run(idemkit.WithFailureMode(idemkit.FailOpen)); err != nil {
			t.Errorf("%s(WithFailureMode) = %v: options of every mode are taken", call, err)
		}
	}
}
