package bench

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestTestScriptRunsEveryModule: ./scripts/test.sh vets, checks and tests
// every module go.work ties together, this one among them (issue 28, item
// 7f): a module left out of its packages list is never tested by CI.
func TestTestScriptRunsEveryModule(t *testing.T) {
	work, err := os.ReadFile("../go.work")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^packages=\(([^)]*)\)`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/test.sh has no packages=(...) line")
	}
	listed := map[string]bool{}
	for _, p := range strings.Fields(string(m[1])) {
		listed[strings.TrimSuffix(p, "/...")] = true
	}
	use := regexp.MustCompile(`(?m)^\s*(\./[^\s)]*|\.)\s*$`).FindAllSubmatch(work, -1)
	if len(use) < 2 {
		t.Fatalf("go.work lists %d modules", len(use))
	}
	for _, u := range use {
		if dir := string(u[1]); !listed[dir] {
			t.Errorf("go.work uses %s, which scripts/test.sh's packages leave out: %s", dir, m[0])
		}
	}
}
