package readme

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// imports maps the package names README blocks use to their import paths.
// A block gets the imports of the names it uses, so an unused import can
// never hide in the wrapper; everything else must be declared in the block.
var imports = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"http":       "net/http",
	"log":        "log",
	"slog":       "log/slog",
	"time":       "time",
	"idemkit":    "github.com/idemkit/idemkit",
	"keying":     "github.com/idemkit/idemkit/keying",
	"budget":     "github.com/idemkit/idemkit/policy/budget",
	"tiered":     "github.com/idemkit/idemkit/policy/tiered",
	"nearcache":  "github.com/idemkit/idemkit/policy/nearcache",
	"store":      "github.com/idemkit/idemkit/store",
	"storetest":  "github.com/idemkit/idemkit/store/storetest",
	"memstore":   "github.com/idemkit/idemkit/store/memstore",
	"boltstore":  "github.com/idemkit/idemkit/store/boltstore",
	"redisstore": "github.com/idemkit/idemkit/store/redisstore",
	"idemhttp":   "github.com/idemkit/idemkit/adapters/idemhttp",
	"idemgrpc":   "github.com/idemkit/idemkit/adapters/idemgrpc",
	"idemfunc":   "github.com/idemkit/idemkit/adapters/idemfunc",
	"redis":      "github.com/redis/go-redis/v9",
	"grpc":       "google.golang.org/grpc",
	"insecure":   "google.golang.org/grpc/credentials/insecure",
	"setup":      "github.com/idemkit/idemkit/setup",
	"sqlstore":   "github.com/idemkit/idemkit/store/sqlstore",
	"sql":        "database/sql",
	"os":         "os",
}

// nested are the project's nested modules, which README blocks may import
// as a user would (each has its own go.mod).
var nested = []string{"otel", "adapters/idemfiber", "adapters/idemlambda", "queue/idemnats", "queue/idemamqp", "store/dynamostore", "queue/idemrelay", "adapters/idemgin", "adapters/idemecho", "adapters/idemconnect"}

var goBlock = regexp.MustCompile("(?ms)^```go\n(.*?)^```")

// docFiles returns README.md and every docs/*.md, relative to this
// package, in a fixed order.
func docFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(guides)
	return append([]string{"../../README.md"}, guides...)
}

// goBlock is one ```go block: its file, its ordinal in the file and its
// text.
type goBlockText struct {
	file string
	n    int
	text string
}

// name is the block's directory in the scratch module, such as
// docs_http_02 for the second Go block of docs/http.md.
func (b goBlockText) name() string {
	rel := strings.TrimPrefix(b.file, "../../")
	rel = strings.TrimSuffix(rel, ".md")
	return fmt.Sprintf("%s_%02d", strings.NewReplacer("/", "_", "-", "_").Replace(rel), b.n)
}

// blocks returns the Go blocks of README.md and docs/*.md.
func blocks(t *testing.T) []goBlockText {
	t.Helper()
	var out []goBlockText
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range goBlock.FindAllSubmatch(text, -1) {
			out = append(out, goBlockText{file: f, n: i + 1, text: string(m[1])})
		}
	}
	return out
}

// program turns a block into a compilable file: a whole file as it is, or
// statements as the body of a function that has ctx and returns an error.
func program(block string) string {
	if strings.HasPrefix(block, "package ") {
		return block
	}
	var paths []string
	for name, path := range imports {
		if regexp.MustCompile(`\b` + name + `\.`).MatchString(block) {
			paths = append(paths, path)
		}
	}
	if !regexp.MustCompile(`\bcontext\.`).MatchString(block) {
		paths = append(paths, "context")
	}
	sort.Strings(paths)
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "\t%q\n", p)
	}
	b.WriteString(")\n\nfunc main() { _ = block(context.Background()) }\n\n")
	b.WriteString("func block(ctx context.Context) error {\n")
	b.WriteString(block)
	b.WriteString("\treturn nil\n}\n")
	return b.String()
}

// TestGoBlocksCompile builds every Go block of README.md and docs/*.md,
// each as its own program in a scratch module that uses this checkout of
// idemkit.
func TestGoBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bs := blocks(t)
	if len(bs) < 10 {
		t.Fatalf("found %d Go blocks in README.md and docs/; the extraction is broken", len(bs))
	}
	dir := t.TempDir()
	var gomod, sums strings.Builder
	fmt.Fprintf(&gomod, "module readmecheck\n\ngo 1.26.0\n\nrequire github.com/idemkit/idemkit v0.0.0\n\nreplace github.com/idemkit/idemkit => %s\n", root)
	for _, m := range append([]string{""}, nested...) {
		if m != "" {
			fmt.Fprintf(&gomod, "\nrequire github.com/idemkit/idemkit/%s v0.0.0\n\nreplace github.com/idemkit/idemkit/%s => %s\n", m, m, filepath.Join(root, m))
		}
		sum, err := os.ReadFile(filepath.Join(root, m, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		sums.Write(sum)
	}
	write(t, filepath.Join(dir, "go.mod"), gomod.String())
	write(t, filepath.Join(dir, "go.sum"), sums.String())
	for _, b := range bs {
		write(t, filepath.Join(dir, b.name(), "main.go"), program(b.text))
	}
	cmd := exec.Command("go", "build", "-mod=mod", "-o", os.DevNull, "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("Go blocks do not compile (docs_http_02 is the second ```go block of docs/http.md):\n%s", out.String())
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
