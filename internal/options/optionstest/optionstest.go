// Package optionstest holds the checks every package's option tests share:
// which exported options a package declares, so that a table of cases can
// be shown to cover each of them, and what a refused option's error must
// be under the one option rule (internal/options).
package optionstest

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
)

// Exported returns the names of the exported functions declared in the
// non-test Go files of dir that return exactly one value of the type
// named typeName (usually "Option"), sorted.
func Exported(tb testing.TB, dir, typeName string) []string {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			tb.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
				continue
			}
			result := fn.Type.Results.List[0].Type
			if ix, ok := result.(*ast.IndexExpr); ok { // a generic Option[T]
				result = ix.X
			}
			if id, ok := result.(*ast.Ident); ok && id.Name == typeName {
				names = append(names, fn.Name.Name)
			}
		}
	}
	if len(names) == 0 {
		tb.Fatalf("no exported function in %s returns %s", dir, typeName)
	}
	slices.Sort(names)
	return names
}

// Covered fails tb for every name in declared that covered lacks.
func Covered(tb testing.TB, declared, covered []string) {
	tb.Helper()
	for _, name := range declared {
		if !slices.Contains(covered, name) {
			tb.Errorf("no option case for %s", name)
		}
	}
}

// Refused fails tb unless err wraps store.ErrInvalid and its text holds
// every one of wants. name says which case it is.
func Refused(tb testing.TB, name string, err error, wants ...string) {
	tb.Helper()
	if !errors.Is(err, store.ErrInvalid) {
		tb.Errorf("%s: error %v, want one wrapping store.ErrInvalid", name, err)
		return
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			tb.Errorf("%s: error %q does not say %q", name, err, want)
		}
	}
}
