package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/storetest"
)

const secret = "s3cr3t-PASS"

func openURL(t *testing.T, rawURL string) *memstore.Store {
	t.Helper()
	s, err := store.Open(context.Background(), rawURL)
	if err != nil {
		t.Fatalf("Open(%q) = %v", rawURL, err)
	}
	ms, ok := s.(*memstore.Store)
	if !ok {
		t.Fatalf("Open(%q) = %T, want *memstore.Store", rawURL, s)
	}
	t.Cleanup(func() { ms.Close() })
	return ms
}

func TestOpenURLConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openURL(t, "mem://?capacity=100000&shards=4") })
}

func TestOpenURLCapacity(t *testing.T) {
	ctx := context.Background()
	for rawURL, want := range map[string]int{
		"mem://?capacity=3&shards=1": 3,
		"mem://?capacity=1":          1,
	} {
		s := openURL(t, rawURL)
		for i := range want + 2 {
			if _, _, err := s.SetNX(ctx, fmt.Sprint("k", i), []byte("v"), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		if s.Len() != want || s.Evictions() != 2 {
			t.Errorf("%s: Len %d, Evictions %d after %d inserts; want %d and 2", rawURL, s.Len(), s.Evictions(), want+2, want)
		}
	}
}

func TestOpenURLDefaultsAndParameters(t *testing.T) {
	for _, rawURL := range []string{"mem://", "mem:", "mem://?sweep_interval=0s", "mem://?sweep_interval=10ms", "mem://?shards=65536&capacity=70000", "mem://?max_bytes=1000000"} {
		openURL(t, rawURL)
	}
}

func TestOpenURLRefusals(t *testing.T) {
	cases := map[string]string{
		"mem://?capacity=0":                       "capacity",
		"mem://?capacity=-5":                      "capacity",
		"mem://?capacity=lots":                    "capacity",
		"mem://?capacity=1&capacity=2":            `"capacity" given 2 times`,
		"mem://?max_bytes=0":                      "max_bytes",
		"mem://?max_bytes=1k":                     "max_bytes",
		"mem://?shards=0":                         "shards",
		"mem://?shards=65537":                     "shards",
		"mem://?sweep_interval=1":                 "sweep_interval",
		"mem://?sweep_interval=-1s":               "sweep_interval",
		"mem://?scope_quota=0":                    "scope_quota",
		"mem://?scope_quota=many":                 "scope_quota",
		"mem://?scope_quota=200&capacity=100":     "scope quota 200 exceeds the capacity 100",
		"mem://?max_entries=5&password=" + secret: "max_entries",
		"mem://?capacity=5&Capacity=6":            "Capacity",
		"mem://user:" + secret + "@":              "no user, host",
		"mem://localhost":                         "no user, host",
		"mem:///tmp/x":                            "no user, host",
		"mem:opaque":                              "no user, host",
		"mem://#frag":                             "no user, host",
	}
	for rawURL, want := range cases {
		s, err := store.Open(context.Background(), rawURL)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open(%q) = %v, %v; want an error wrapping store.ErrInvalid", rawURL, s, err)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %q does not name %q", rawURL, err, want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%q): error leaks the secret: %q", rawURL, err)
		}
	}
}

// Open a memory store from a URL: the choice can come from configuration.
func Example_openURL() {
	s, err := store.Open(context.Background(), "mem://?capacity=50000")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.(store.Closer).Close()
	fmt.Printf("%T\n", s)

	_, err = store.Open(context.Background(), "mem://?capacity=50000&capacty=1")
	fmt.Println(err)
	// Output:
	// *memstore.Store
	// memstore: open mem:?capacity=50000&capacty=1: store: invalid argument: unknown parameter(s) capacty
}

func TestOpenURLMaxBytes(t *testing.T) {
	ctx := context.Background()
	s := openURL(t, "mem://?max_bytes=2000&shards=1&capacity=1000")
	value := make([]byte, 100)
	for i := range 20 {
		if _, _, err := s.SetNX(ctx, fmt.Sprint("k", i), value, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	perEntry := 2 + len(value) + memstore.EntryOverhead
	if s.Len() > 2000/perEntry || s.Evictions() == 0 {
		t.Errorf("max_bytes=2000: Len %d, Evictions %d after 20 entries of ~%d bytes", s.Len(), s.Evictions(), perEntry)
	}
}

func TestURLOptions(t *testing.T) {
	var evicted []string
	opts, err := memstore.URLOptions("mem://?capacity=2&shards=1&sweep_interval=0s")
	if err != nil {
		t.Fatal(err)
	}
	s, err := memstore.New(append(opts, memstore.WithOnEvict(func(key string) { evicted = append(evicted, key) }))...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := range 3 {
		if _, _, err := s.SetNX(ctx, fmt.Sprintf("k%d", i), []byte("v"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if len(evicted) != 1 || evicted[0] != "k0" {
		t.Fatalf("evicted %q with capacity=2 from the URL, want [k0]", evicted)
	}
	for _, bad := range []string{"redis://x", "mem://host", "mem://?capacity=0", "mem://?colour=blue", "::"} {
		if _, err := memstore.URLOptions(bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("URLOptions(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

// TestOpenURLScopeQuota opens a store with scope_quota: a scope, as the
// engine's key layout names it, keeps at most that many entries, evicting
// its own; another scope's entries stay.
func TestOpenURLScopeQuota(t *testing.T) {
	ctx := context.Background()
	s := openURL(t, "mem://?scope_quota=2&capacity=100&shards=2")
	for i := range 5 {
		if _, _, err := s.SetNX(ctx, fmt.Sprintf("idem:1:flood:k%d", i), []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.SetNX(ctx, "idem:1:calm:k", []byte("v"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 || s.Evictions() != 3 {
		t.Errorf("scope_quota=2: Len %d, Evictions %d after 5 keys of one scope and 1 of another; want 3 and 3", s.Len(), s.Evictions())
	}
	if _, err := s.Get(ctx, "idem:1:calm:k"); err != nil {
		t.Errorf("the other scope's key: %v", err)
	}
}
