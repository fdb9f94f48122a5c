package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
	"github.com/idemkit/idemkit/store/storetest"
)

const urlSecret = "s3cr3t-PASS"

func openBoltURL(t *testing.T, rawURL string) *boltstore.Store {
	t.Helper()
	s, err := store.Open(context.Background(), rawURL)
	if err != nil {
		t.Fatalf("Open(%q) = %v", rawURL, err)
	}
	bs, ok := s.(*boltstore.Store)
	if !ok {
		t.Fatalf("Open(%q) = %T, want *boltstore.Store", rawURL, s)
	}
	t.Cleanup(func() { bs.Close() })
	return bs
}

func TestOpenURLConformance(t *testing.T) {
	dir := t.TempDir()
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		return openBoltURL(t, fmt.Sprintf("bolt://%s/s%d.db?nosync=true", dir, n))
	})
}

func TestOpenURLRoundTripKeepsEntriesInTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	rawURL := "bolt://" + path + "?bucket=orders&open_timeout=2s&sweep_interval=0s&sweep_batch=10"
	s := openBoltURL(t, rawURL)
	if _, _, err := s.SetNX(ctx, "k", []byte("v"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBoltURL(t, rawURL)
	if e, err := s.Get(ctx, "k"); err != nil || string(e.Value) != "v" {
		t.Fatalf("after reopening: Get = %q, %v", e.Value, err)
	}
	_, err := store.Open(ctx, "bolt://"+path+"?open_timeout=50ms")
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("second Open while the first holds the file = %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	other := openBoltURL(t, "bolt://"+path+"?bucket=other")
	if _, err := other.Get(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bucket=other sees the entry of bucket=orders: %v", err)
	}
}

func TestParseURL(t *testing.T) {
	cases := map[string]boltstore.URLConfig{
		"bolt:///var/lib/idem.db": {Path: "/var/lib/idem.db", OpenTimeout: boltstore.DefaultOpenTimeout,
			Bucket: boltstore.DefaultBucket, SweepInterval: boltstore.DefaultSweepInterval, SweepBatch: boltstore.DefaultSweepBatch},
		"bolt://idemdemo.db?nosync=1": {Path: "idemdemo.db", NoSync: true, OpenTimeout: boltstore.DefaultOpenTimeout,
			Bucket: boltstore.DefaultBucket, SweepInterval: boltstore.DefaultSweepInterval, SweepBatch: boltstore.DefaultSweepBatch},
		"bolt://data/x.db?nosync=false&open_timeout=250ms&bucket=b&sweep_interval=0s&sweep_batch=7": {Path: "data/x.db",
			OpenTimeout: 250 * time.Millisecond, Bucket: "b", SweepBatch: 7},
		"bolt:///a%20b.db": {Path: "/a b.db", OpenTimeout: boltstore.DefaultOpenTimeout,
			Bucket: boltstore.DefaultBucket, SweepInterval: boltstore.DefaultSweepInterval, SweepBatch: boltstore.DefaultSweepBatch},
	}
	for rawURL, want := range cases {
		got, err := boltstore.ParseURL(rawURL)
		if err != nil || *got != want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", rawURL, got, err, want)
		}
	}
}

func TestOpenURLRefusals(t *testing.T) {
	cases := map[string]string{
		"bolt://":                            "needs a file",
		"bolt:":                              "needs a file",
		"bolt:relative.db":                   "needs a file",
		"bolt://u:" + urlSecret + "@h/x.db":  "no user",
		"bolt://host:99/x.db":                "no user, port",
		"bolt:///x.db#frag":                  "fragment",
		"bolt:///x.db?nosync=yes":            "nosync",
		"bolt:///x.db?nosync=":               "nosync",
		"bolt:///x.db?open_timeout=5":        "open_timeout",
		"bolt:///x.db?open_timeout=0s":       "open_timeout",
		"bolt:///x.db?bucket=":               "bucket is empty",
		"bolt:///x.db?sweep_interval=-1s":    "sweep_interval",
		"bolt:///x.db?sweep_batch=0":         "sweep_batch",
		"bolt:///x.db?no_sync=1":             "no_sync",
		"bolt:///x.db?password=" + urlSecret: "password",
		"bolt:///x.db?nosync=1&nosync=0":     `"nosync" given 2 times`,
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
		if strings.Contains(err.Error(), urlSecret) {
			t.Errorf("Open(%q): error leaks the secret: %q", rawURL, err)
		}
	}
	if _, err := boltstore.ParseURL("redis://localhost"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ParseURL of a redis URL = %v", err)
	}
}

// Open a bbolt store from a URL: the file is created if missing.
func Example_openURL() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(context.Background(), "bolt://"+dir+"/idem.db?open_timeout=2s")
	if err != nil {
		log.Fatal(err)
	}
	defer s.(store.Closer).Close()
	fmt.Printf("%T\n", s)
	// Output: *boltstore.Store
}
