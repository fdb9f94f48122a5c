package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// TestNoProcessClock shows that the package never reads the process
// clock: no time.Now, time.Since or time.Until outside tests. Expiry and
// remaining TTLs come from the database's clock alone, so instances whose
// clocks disagree agree on every key.
func TestNoProcessClock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := filepath.Glob("*/*.go")
	fset := token.NewFileSet()
	for _, f := range append(files, sub...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
				switch sel.Sel.Name {
				case "Now", "Since", "Until":
					t.Errorf("%s: time.%s: the store must read only the database's clock", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}

// TestDatabaseClock runs two views of one table whose clocks disagree by
// an hour: the MySQL session clock of one is set ahead (SET TIMESTAMP),
// as a skewed server clock would be. A key set for ten minutes by the
// store is live for the store and expired for the view ahead of it, which
// claims it; each side then computes TTLs from its own database clock.
func TestDatabaseClock(t *testing.T) {
	ctx := t.Context()
	s := newStore(t, my)
	conn, err := my.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		conn.ExecContext(context.Background(), "SET TIMESTAMP = DEFAULT")
		conn.Close()
	}()
	if _, err := conn.ExecContext(ctx, "SET TIMESTAMP = UNIX_TIMESTAMP(NOW(6)) + 3600"); err != nil {
		t.Fatal(err)
	}
	ahead := s.Tx(conn)

	mustSet(t, s, "k", []byte("now"), 10*time.Minute)
	if _, err := ahead.Get(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get an hour ahead of a key set for 10 minutes = %v, want ErrNotFound", err)
	}
	set, _, err := ahead.SetNX(ctx, "k", []byte("ahead"), 90*time.Minute)
	if err != nil || !set {
		t.Fatalf("SetNX an hour ahead of a key set for 10 minutes = %v, %v; want it to reclaim the key", set, err)
	}
	e, err := s.Get(ctx, "k")
	if err != nil || string(e.Value) != "ahead" {
		t.Fatalf("Get = %q, %v; want the value set ahead", e.Value, err)
	}
	// Set 90 minutes from a clock an hour ahead: 150 minutes from now.
	if e.TTL <= 149*time.Minute || e.TTL > 150*time.Minute {
		t.Errorf("TTL read on the true clock = %v, want about 150m", e.TTL)
	}
}

// TestEnginesWithSkewedClocksAgree runs two instances, each with its own
// pool and an engine whose clock is an hour off the other's (one behind,
// one ahead), on one table. They agree on every key: neither takes over
// the other's live claim, both replay the same result with the same
// remaining TTL, a window closes for both, and the result expires for
// both at once, on the database's clock.
func TestEnginesWithSkewedClocksAgree(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			table := freshTable(t, b)
			instance := func(skew time.Duration) *idemkit.Engine {
				db, err := sql.Open(b.driver, b.dsn)
				if err != nil {
					t.Fatal(err)
				}
				s, err := sqlstore.New(db, b.dialect, sqlstore.WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close(); db.Close() })
				e, err := idemkit.New(s, idemkit.WithObserver(nil),
					idemkit.WithClock(func() time.Time { return time.Now().Add(skew) }),
					idemkit.WithRetention(2*time.Second), idemkit.WithWindow(time.Second))
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			behind, ahead := instance(-time.Hour), instance(time.Hour)
			runs := 0
			fn := func(v string) func(context.Context) ([]byte, error) {
				return func(context.Context) ([]byte, error) { runs++; return []byte(v), nil }
			}

			c, _, err := behind.Begin(ctx, "k", "fp")
			if err != nil || c == nil {
				t.Fatalf("Begin = %v, %v", c, err)
			}
			if _, err := ahead.Do(ctx, "k", "fp", fn("twice")); !errors.Is(err, idemkit.ErrInProgress) {
				t.Fatalf("Do two hours ahead of a live claim = %v, want ErrInProgress", err)
			}
			if err := c.Complete(ctx, []byte("once")); err != nil {
				t.Fatal(err)
			}
			for name, e := range map[string]*idemkit.Engine{"behind": behind, "ahead": ahead} {
				res, err := e.Do(ctx, "k", "fp", fn("twice"))
				if err != nil || !res.Replayed || string(res.Value) != "once" {
					t.Fatalf("Do %s = %+v, %v; want the replayed result", name, res, err)
				}
			}
			a, errA := behind.Inspect(ctx, idemkit.ModeDo, "k")
			z, errZ := ahead.Inspect(ctx, idemkit.ModeDo, "k")
			if errA != nil || errZ != nil {
				t.Fatal(errA, errZ)
			}
			if d := a.TTL - z.TTL; d < -500*time.Millisecond || d > 500*time.Millisecond {
				t.Errorf("remaining TTL behind %v, ahead %v: want the same", a.TTL, z.TTL)
			}

			if err := ahead.Guard(ctx, "w", func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if err := behind.Guard(ctx, "w", func(context.Context) error { return nil }); !errors.Is(err, idemkit.ErrDuplicate) {
				t.Fatalf("Guard two hours behind inside the window = %v, want ErrDuplicate", err)
			}

			// Wait for the result to expire on the database's clock; then it
			// is gone for both, and the next call runs fn once.
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := ahead.Inspect(ctx, idemkit.ModeDo, "k")
				if errors.Is(err, store.ErrNotFound) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the result did not expire within 10s: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if _, err := behind.Inspect(ctx, idemkit.ModeDo, "k"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Inspect behind after the result expired ahead = %v, want ErrNotFound", err)
			}
			if res, err := behind.Do(ctx, "k", "fp", fn("again")); err != nil || res.Replayed || runs != 1 {
				t.Fatalf("Do after expiry = %+v, %v (runs %d); want one fresh run", res, err, runs)
			}
			if err := behind.Guard(ctx, "w", func(context.Context) error { return nil }); err != nil {
				t.Fatalf("Guard after the window = %v", err)
			}
		})
	}
}
