package keying

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// optionCase is a list of options and what NewFingerprinter makes of it.
type optionCase struct {
	name, option string
	opts         []Option
	volatile     []string // the Fingerprinter's paths, when it is built
	errs         []string // what the error says, or nil when there is none
	is           error    // what the error wraps besides store.ErrInvalid
}

// optionCases covers every exported option (option names it), each
// accepted and refused, with the rules every option follows: a nil
// option is refused by its position counted from 1, an option's error
// names the option, every error is reported rather than the first only,
// and all wrap store.ErrInvalid.
var optionCases = []optionCase{
	{name: "none", volatile: []string{}},
	{name: "paths", option: "WithVolatile", opts: []Option{WithVolatile("b.c", "a", `x\.y`, "[].n")}, volatile: []string{"[].n", "a", "b.c", `x\.y`}},
	{name: "no paths", option: "WithVolatile", opts: []Option{WithVolatile()}, volatile: []string{}},
	{name: "paths add up", option: "WithVolatile", opts: []Option{WithVolatile("b"), WithVolatile("a", "b")}, volatile: []string{"a", "b"}},
	{name: "malformed paths", option: "WithVolatile", opts: []Option{WithVolatile("ok", "a..b", "", "a[")},
		errs: []string{"WithVolatile: ", `"a..b"`, `""`, `"a["`}, is: ErrInvalidPath},
	{name: "include", option: "WithInclude", opts: []Option{WithInclude("id", "items[].sku")}, volatile: []string{}},
	{name: "include nothing", option: "WithInclude", opts: []Option{WithInclude()}, errs: []string{"WithInclude: no paths"}},
	{name: "malformed include", option: "WithInclude", opts: []Option{WithInclude("ok", "a..b")},
		errs: []string{"WithInclude: ", `"a..b"`}, is: ErrInvalidPath},
	{name: "nil", opts: []Option{WithVolatile("a"), nil}, errs: []string{"keying: store: invalid argument: option 2 is nil"}},
	{name: "every error", option: "WithVolatile", opts: []Option{nil, WithVolatile("a["), WithVolatile("ok"), nil},
		errs: []string{"option 1 is nil", "WithVolatile: ", `"a["`, "option 4 is nil"}, is: ErrInvalidPath},
}

func TestOptions(t *testing.T) {
	for _, tc := range optionCases {
		f, err := NewFingerprinter(tc.opts...)
		if tc.errs == nil {
			require.NoError(t, err, tc.name)
			assert.Equal(t, tc.volatile, append([]string{}, f.Volatile()...), tc.name)
			continue
		}
		require.ErrorIs(t, err, store.ErrInvalid, tc.name)
		assert.Nil(t, f, tc.name)
		if tc.is != nil {
			assert.ErrorIs(t, err, tc.is, tc.name)
		}
		for _, want := range tc.errs {
			assert.Contains(t, err.Error(), want, tc.name)
		}
		assert.NotContains(t, err.Error(), `"ok"`, "%s: a good path is not blamed", tc.name)
	}
}

// TestOptionsCoverEveryOption: optionCases holds a case for every
// exported function of the package that returns an Option.
func TestOptionsCoverEveryOption(t *testing.T) {
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	var options []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		require.NoError(t, err)
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
				continue
			}
			if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); ok && id.Name == "Option" {
				options = append(options, fn.Name.Name)
			}
		}
	}
	require.NotEmpty(t, options)
	for _, name := range options {
		assert.True(t, slices.ContainsFunc(optionCases, func(c optionCase) bool { return c.option == name }), "no case for %s", name)
	}
}
