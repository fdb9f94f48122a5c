package dynalitetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLookup: an unset variable skips, saying why, except under CI=true,
// where it is an error; a path that does not exist is an error.
func TestLookup(t *testing.T) {
	t.Setenv(Env, "")
	t.Setenv("CI", "")
	path, skip, err := Lookup()
	if path != "" || err != nil || !strings.Contains(skip, Env+" is unset") {
		t.Fatalf("unset: Lookup() = %q, %q, %v; want a reason to skip", path, skip, err)
	}

	t.Setenv("CI", "true")
	path, skip, err = Lookup()
	if path != "" || skip != "" || err == nil || !strings.Contains(err.Error(), "required under CI=true") {
		t.Fatalf("unset under CI: Lookup() = %q, %q, %v; want an error", path, skip, err)
	}

	missing := filepath.Join(t.TempDir(), "cli.js")
	t.Setenv(Env, missing)
	if _, _, err = Lookup(); err == nil {
		t.Fatalf("missing file: Lookup() returned no error")
	}

	if err := os.WriteFile(missing, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	path, skip, err = Lookup()
	if path != missing || skip != "" || err != nil {
		t.Fatalf("set: Lookup() = %q, %q, %v; want the path", path, skip, err)
	}
}
