package store_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

func params(t *testing.T, query string) *store.Params {
	t.Helper()
	return store.NewParams(&url.URL{RawQuery: query})
}

func TestParamsTypedValues(t *testing.T) {
	p := params(t, "n=42&d=250ms&b=true&z=0&f=false")
	if n, ok, err := p.Int("n", 1); n != 42 || !ok || err != nil {
		t.Errorf("Int = %d, %v, %v", n, ok, err)
	}
	if d, ok, err := p.Duration("d", time.Millisecond); d != 250*time.Millisecond || !ok || err != nil {
		t.Errorf("Duration = %v, %v, %v", d, ok, err)
	}
	if b, ok, err := p.Bool("b"); !b || !ok || err != nil {
		t.Errorf("Bool = %v, %v, %v", b, ok, err)
	}
	if b, ok, err := p.Bool("f"); b || !ok || err != nil {
		t.Errorf("Bool(false) = %v, %v, %v", b, ok, err)
	}
	if n, ok, err := p.Int("z", 0); n != 0 || !ok || err != nil {
		t.Errorf("Int(0, least 0) = %d, %v, %v", n, ok, err)
	}
	if _, ok, err := p.Int("absent", 1); ok || err != nil {
		t.Errorf("Int of an absent parameter = %v, %v", ok, err)
	}
	if err := p.Done(); err != nil {
		t.Errorf("Done = %v", err)
	}
}

func TestParamsTypedRefusals(t *testing.T) {
	for query, read := range map[string]func(*store.Params) error{
		"n=x":     func(p *store.Params) error { _, _, err := p.Int("n", 1); return err },
		"n=0":     func(p *store.Params) error { _, _, err := p.Int("n", 1); return err },
		"n=1&n=2": func(p *store.Params) error { _, _, err := p.Int("n", 1); return err },
		"d=5":     func(p *store.Params) error { _, _, err := p.Duration("d", 0); return err },
		"d=-1s":   func(p *store.Params) error { _, _, err := p.Duration("d", 0); return err },
		"d=1ms":   func(p *store.Params) error { _, _, err := p.Duration("d", time.Second); return err },
		"b=yes":   func(p *store.Params) error { _, _, err := p.Bool("b"); return err },
		"b=":      func(p *store.Params) error { _, _, err := p.Bool("b"); return err },
		"b=1&b=0": func(p *store.Params) error { _, _, err := p.Bool("b"); return err },
	} {
		err := read(params(t, query))
		name, _, _ := strings.Cut(query, "=")
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an ErrInvalid naming %s", query, err, name)
		}
	}
}
