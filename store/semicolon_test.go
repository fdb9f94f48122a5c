package store_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// semicolonQueries are queries in which a ';' would make Go's url.Query
// drop a pair without a word: the parameter the pair sets would silently
// take its default.
var semicolonQueries = []string{
	"mode=x;y",
	"mode=x&other;y=1",
	"mode=1;password=" + secret,
	"password=" + secret + ";x",
	";",
}

// TestOpenRefusesSemicolonInQuery opens URLs of every scheme the store
// package itself can check (a test scheme and mem://) whose query holds a
// ';': Open refuses each with an error wrapping ErrInvalid that names the
// ';' but never a secret, instead of running with the pair dropped.
func TestOpenRefusesSemicolonInQuery(t *testing.T) {
	for _, base := range []string{"testdown://h/?", "mem://?"} {
		for _, q := range semicolonQueries {
			rawURL := base + q
			s, err := store.Open(context.Background(), rawURL)
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("Open(%q) = %T, %v; want an error wrapping ErrInvalid", store.Redact(rawURL), s, err)
				continue
			}
			if !strings.Contains(err.Error(), "';'") {
				t.Errorf("Open(%q): %q does not name the ';'", store.Redact(rawURL), err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Open(%q): error leaks the secret: %q", store.Redact(rawURL), err)
			}
		}
	}
}

// TestParamsRefuseSemicolon reads parameters of a query holding a ';' the
// way a backend's own URL parser does, without store.Open (memstore's
// URLOptions, boltstore's ParseURL): the first read and Done both fail.
func TestParamsRefuseSemicolon(t *testing.T) {
	p := store.NewParams(&url.URL{RawQuery: "table=atk_idem;x&create_table=true"})
	if v, ok, err := p.String("create_table"); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "';'") {
		t.Errorf("String(create_table) = %q, %v, %v; want an error wrapping ErrInvalid naming the ';'", v, ok, err)
	}
	if err := p.Done(); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Done = %v; want an error wrapping ErrInvalid", err)
	}
	if _, err := memstore.URLOptions("mem://?capacity=10;x"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("memstore.URLOptions with a ';' = %v; want an error wrapping ErrInvalid", err)
	}
}

// TestRedactSemicolonQuery: a query Go's parser refuses still has its
// secret values hidden, including one set after a ';'.
func TestRedactSemicolonQuery(t *testing.T) {
	for _, in := range []string{
		"postgres://h/db?password=" + secret + ";x",
		"postgres://h/db?table=t;password=" + secret,
		"redis://h/?a=1&sslpassword=" + secret + ";b=2&c=3",
	} {
		got := store.Redact(in)
		if strings.Contains(got, secret) {
			t.Errorf("Redact(%q) = %q: shows the secret", in, got)
		}
		if !strings.Contains(got, "xxxxx") {
			t.Errorf("Redact(%q) = %q: hides nothing", in, got)
		}
	}
}
