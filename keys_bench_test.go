package idemkit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemkit/idemkit"
)

// Key naming with and without a key secret (WithKeySecret):
//
//	go test -run '^$' -bench 'Key|Do' -benchmem .
//
// short is an unscoped key that fits one SHA-256 block with its domain;
// http is an idemhttp key (a 40-byte client key) under a principal.

var benchKeys = []struct{ name, scope, key string }{
	{"short", "", "order-1"},
	{"http", "user-4711@example.com", "http:" + strings.Repeat("k", 40)},
}

func benchStoreKey(b *testing.B, opts ...idemkit.Option) {
	e, _ := benchEngine(b, opts...)
	for _, k := range benchKeys {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = idemkit.StoreKey(e, idemkit.ModeDo, k.scope, k.key)
			}
		})
	}
}

func BenchmarkStoreKey(b *testing.B) { benchStoreKey(b) }

func benchDoReplayScoped(b *testing.B, opts ...idemkit.Option) {
	e, _ := benchEngine(b, opts...)
	ctx := context.Background()
	work := func(context.Context) ([]byte, error) { return []byte(`{"id":"o-1","status":"created"}`), nil }
	key, fp := "http:"+strings.Repeat("k", 40), "http:"+strings.Repeat("f", 43) // an idemhttp key and fingerprint
	scope := []idemkit.Option{idemkit.WithScope("user-4711@example.com")}
	if _, err := e.Do(ctx, key, fp, work, scope...); err != nil {
		b.Fatal(err)
	}
	runBoth(b, func(*keyer) {
		res, err := e.Do(ctx, key, fp, work, scope...)
		if err != nil || !res.Replayed {
			b.Fatal("not replayed", err)
		}
	})
}

func BenchmarkDoReplayScoped(b *testing.B) { benchDoReplayScoped(b) }
