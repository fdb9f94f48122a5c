package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// TestOpenURLRefusesSemicolon opens Redis URLs of every topology whose
// query holds a ';', through store.Open and through OpenURL: Go's
// url.Query drops such a pair without a word, so redis://h/?prefix=shop:;x
// ran with no prefix at all. Each must be refused with an error wrapping
// store.ErrInvalid that names the ';' and not the password.
func TestOpenURLRefusesSemicolon(t *testing.T) {
	pw := ":" + urlSecret + "@"
	for _, rawURL := range []string{
		"redis://" + pw + "h:1/0?prefix=shop:;x",
		"rediss://" + pw + "h:1/0?prefix=shop:&pool_size=2;x",
		"redis://" + pw + "h:1/0?prefix=p&password=" + urlSecret + ";x",
		"redis+sentinel://" + pw + "s1:26379/m?prefix=shop:;x",
		"redis+cluster://" + pw + "h:1,h:2?prefix=shop:;x",
	} {
		open := map[string]func() (store.Store, error){
			"store.Open": func() (store.Store, error) { return store.Open(context.Background(), rawURL) },
			"OpenURL": func() (store.Store, error) {
				s, err := redisstore.OpenURL(context.Background(), rawURL)
				if s == nil {
					return nil, err
				}
				return s, err
			},
		}
		for name, f := range open {
			s, err := f()
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s(%q) = %T, %v; want an error wrapping store.ErrInvalid", name, store.Redact(rawURL), s, err)
				if c, ok := s.(store.Closer); ok {
					c.Close()
				}
				continue
			}
			if !strings.Contains(err.Error(), "';'") {
				t.Errorf("%s(%q): %q does not name the ';'", name, store.Redact(rawURL), err)
			}
			if strings.Contains(err.Error(), urlSecret) {
				t.Errorf("%s(%q): error leaks the secret: %q", name, store.Redact(rawURL), err)
			}
		}
	}
}
