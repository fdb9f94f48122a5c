package options_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// exceptions are the packages (directories relative to the repository's
// root) whose exported Option may keep another shape, each with its
// reason. There are none; the map stays so that one would be named here.
var exceptions = map[string]string{}

// TestEveryOptionFollowsTheOneRule is issue 28's audit: it walks every Go
// package of the repository (the root module and the nested modules,
// skipping testdata and test files), lists every exported type named
// Option, and checks that it is func(*T) error (a generic Option[P] of
// that shape included) and that its package applies its options through
// this package (options.Apply or options.Collect). The one exception is
// named in exceptions, with its reason (none today).
func TestEveryOptionFollowsTheOneRule(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("%s is not the repository's root: %v", root, err)
	}
	type pkg struct {
		option  *ast.TypeSpec
		applies bool // calls internal/options' Apply or Collect, under any import name
	}
	pkgs := map[string]*pkg{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		p := pkgs[rel]
		if p == nil {
			p = &pkg{}
			pkgs[rel] = p
		}
		local := "" // the name this file imports internal/options by
		for _, imp := range file.Imports {
			if imp.Path.Value == `"github.com/idemkit/idemkit/internal/options"` {
				local = "options"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				if n.Name.Name == "Option" {
					p.option = n
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && local != "" && x.Name == local && (n.Sel.Name == "Apply" || n.Sel.Name == "Collect") {
					p.applies = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for dir, p := range pkgs {
		if p.option != nil {
			dirs = append(dirs, dir)
		}
	}
	slices.Sort(dirs)
	if len(dirs) < 10 {
		t.Fatalf("found %d packages with an Option, want the repository's (at least 10): %v", len(dirs), dirs)
	}
	for _, dir := range dirs {
		p := pkgs[dir]
		shape := types(p.option)
		if reason, ok := exceptions[dir]; ok {
			t.Logf("%-28s Option %s (exception: %s)", dir, shape, reason)
			continue
		}
		t.Logf("%-28s Option %s", dir, shape)
		if !oneShape(p.option) {
			t.Errorf("%s: Option is %s, want func(*T) error", dir, shape)
		}
		if !p.applies {
			t.Errorf("%s: its options are not applied through options.Apply or options.Collect", dir)
		}
	}
	for dir := range exceptions {
		if p := pkgs[dir]; p == nil || p.option == nil || oneShape(p.option) {
			t.Errorf("exception %q is stale: remove it", dir)
		}
	}
}

// oneShape reports whether ts declares func(*T) error.
func oneShape(ts *ast.TypeSpec) bool {
	fn, ok := ts.Type.(*ast.FuncType)
	if !ok || fn.Params == nil || fn.Results == nil || len(fn.Params.List) != 1 || len(fn.Results.List) != 1 {
		return false
	}
	if len(fn.Params.List[0].Names) > 1 || len(fn.Results.List[0].Names) > 1 {
		return false
	}
	if _, ok := fn.Params.List[0].Type.(*ast.StarExpr); !ok {
		return false
	}
	res, ok := fn.Results.List[0].Type.(*ast.Ident)
	return ok && res.Name == "error"
}

// types renders ts's type for the log.
func types(ts *ast.TypeSpec) string {
	var b strings.Builder
	if ts.TypeParams != nil {
		b.WriteString("[generic] ")
	}
	switch tt := ts.Type.(type) {
	case *ast.StructType:
		b.WriteString("struct")
	case *ast.FuncType:
		b.WriteString("func(")
		for i, f := range tt.Params.List {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(expr(f.Type))
		}
		b.WriteString(")")
		if tt.Results != nil {
			for _, f := range tt.Results.List {
				b.WriteString(" " + expr(f.Type))
			}
		}
	default:
		b.WriteString(expr(ts.Type))
	}
	return b.String()
}

// expr renders a type expression briefly.
func expr(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + expr(e.X)
	case *ast.SelectorExpr:
		return expr(e.X) + "." + e.Sel.Name
	case *ast.IndexExpr:
		return expr(e.X) + "[" + expr(e.Index) + "]"
	case *ast.IndexListExpr:
		return expr(e.X) + "[...]"
	case *ast.FuncType:
		return "func(...)"
	}
	return "?"
}
