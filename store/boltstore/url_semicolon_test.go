package boltstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
)

// TestOpenURLRefusesSemicolon opens bolt URLs whose query holds a ';',
// through store.Open and ParseURL: Go's url.Query drops such a pair
// without a word (bucket=orders;x would have used the default bucket).
// Each must be refused with an error wrapping store.ErrInvalid that names
// the ';', and no file may be created.
func TestOpenURLRefusesSemicolon(t *testing.T) {
	dir := t.TempDir()
	for _, q := range []string{"bucket=orders;x", "nosync=true&bucket=orders;x", "bucket=orders&password=" + urlSecret + ";x"} {
		rawURL := "bolt://" + filepath.Join(dir, "idem.db") + "?" + q
		s, err := store.Open(context.Background(), rawURL)
		if err == nil {
			s.(store.Closer).Close()
		}
		c, perr := boltstore.ParseURL(rawURL)
		for name, err := range map[string]error{"Open": err, "ParseURL": perr} {
			switch {
			case !errors.Is(err, store.ErrInvalid):
				t.Errorf("%s(%q) = %v (config %+v); want an error wrapping store.ErrInvalid", name, store.Redact(rawURL), err, c)
			case !strings.Contains(err.Error(), "';'"):
				t.Errorf("%s(%q): %q does not name the ';'", name, store.Redact(rawURL), err)
			case strings.Contains(err.Error(), urlSecret):
				t.Errorf("%s(%q): error leaks the secret: %q", name, store.Redact(rawURL), err)
			}
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "*")); len(entries) != 0 {
		t.Errorf("refused URLs left files: %v", entries)
	}
}
