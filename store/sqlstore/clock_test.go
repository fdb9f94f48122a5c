package sqlstore_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
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
