package setup_test

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/setup"
	"github.com/idemkit/idemkit/store"
	_ "github.com/idemkit/idemkit/store/boltstore"
	"github.com/idemkit/idemkit/store/storetest"
)

const secret = "s3cr3t-PASS"

// closes counts the Close calls of stores opened by "testdown://".
var closes atomic.Int64

type downStore struct{ store.Store }

func (downStore) Close() error { closes.Add(1); return nil }

func init() {
	store.Register("testdown", func(_ context.Context, u *url.URL) (store.Store, error) {
		if err := store.NewParams(u).Done(); err != nil {
			return nil, err
		}
		return downStore{storetest.Unavailable()}, nil
	})
}

func TestFromEnv(t *testing.T) {
	cases := map[string]struct {
		env  []string
		want setup.Config
	}{
		"nothing": {[]string{"HOME=/root", "PATH=/bin"}, setup.Config{}},
		"all": {[]string{
			"IDEMKIT_STORE=redis://:" + secret + "@h:6379/0", "IDEMKIT_FALLBACK=mem://",
			"IDEMKIT_ON_STORE_ERROR=open", "IDEMKIT_BUDGET=250ms", "IDEMKIT_NEAR_CACHE=5000",
		}, setup.Config{Store: "redis://:" + secret + "@h:6379/0", Fallback: "mem://",
			OnStoreError: idemkit.FailOpen, Budget: 250 * time.Millisecond, NearCache: 5000}},
		"offs": {[]string{"IDEMKIT_STORE=mem://", "IDEMKIT_BUDGET=off", "IDEMKIT_NEAR_CACHE=off", "IDEMKIT_ON_STORE_ERROR=closed"},
			setup.Config{Store: "mem://", Budget: setup.NoBudget}},
		"empty values keep defaults": {[]string{"IDEMKIT_STORE=", "IDEMKIT_BUDGET= "}, setup.Config{}},
	}
	for name, c := range cases {
		got, err := setup.FromEnv(c.env)
		if err != nil || got.Store != c.want.Store || got.Fallback != c.want.Fallback || got.OnStoreError != c.want.OnStoreError ||
			got.Budget != c.want.Budget || got.NearCache != c.want.NearCache {
			t.Errorf("%s: FromEnv = %+v, %v; want %+v", name, got, err, c.want)
		}
	}
}

func TestFromEnvRefusals(t *testing.T) {
	cases := map[string]string{
		"IDEMKIT_STOR=mem://":              "IDEMKIT_STOR",
		"IDEMKIT_ON_STORE_ERROR=fail-open": "IDEMKIT_ON_STORE_ERROR",
		"IDEMKIT_ON_STORE_ERROR=Open":      "IDEMKIT_ON_STORE_ERROR",
		"IDEMKIT_BUDGET=100":               "IDEMKIT_BUDGET",
		"IDEMKIT_BUDGET=-1s":               "IDEMKIT_BUDGET",
		"IDEMKIT_BUDGET=0s":                "IDEMKIT_BUDGET",
		"IDEMKIT_NEAR_CACHE=0":             "IDEMKIT_NEAR_CACHE",
		"IDEMKIT_NEAR_CACHE=lots":          "IDEMKIT_NEAR_CACHE",
	}
	for kv, want := range cases {
		_, err := setup.FromEnv([]string{"IDEMKIT_STORE=redis://:" + secret + "@h", kv})
		if !errors.Is(err, setup.ErrConfig) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), secret) {
			t.Errorf("FromEnv(%q) = %v; want an ErrConfig naming %s", kv, err, want)
		}
	}
}

func TestBuildRefusals(t *testing.T) {
	cases := map[string]struct {
		c    setup.Config
		is   error
		want string
	}{
		"no store":         {setup.Config{}, setup.ErrConfig, "IDEMKIT_STORE"},
		"unknown scheme":   {setup.Config{Store: "nosuch://u:" + secret + "@h"}, store.ErrUnknownScheme, "setup: store URL: "},
		"bad store param":  {setup.Config{Store: "mem://?capacity=0&password=" + secret}, store.ErrInvalid, "capacity"},
		"bad fallback":     {setup.Config{Store: "testdown://", Fallback: "mem://?bogus=1&password=" + secret}, store.ErrInvalid, "setup: fallback URL: "},
		"bad failure mode": {setup.Config{Store: "mem://", OnStoreError: 7}, setup.ErrConfig, "failure mode"},
		"bad budget":       {setup.Config{Store: "mem://", Budget: -5}, setup.ErrConfig, "budget"},
		"bad near cache":   {setup.Config{Store: "mem://", NearCache: -1}, setup.ErrConfig, "near cache"},
	}
	for name, c := range cases {
		before := closes.Load()
		st, err := setup.Build(context.Background(), c.c)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: Build = %v, %v; want an error wrapping %v naming %q", name, st, err, c.is, c.want)
		}
		if strings.HasPrefix(c.c.Store, "testdown") && closes.Load() != before+1 {
			t.Errorf("%s: the store opened before the error was not closed", name)
		}
	}
}

func TestBuildStackLayers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	for _, c := range []struct {
		cfg               setup.Config
		tiered, near      bool
		budgeted, failure bool
	}{
		{cfg: setup.Config{Store: "mem://"}},
		{cfg: setup.Config{Store: "bolt://" + path}},
		{cfg: setup.Config{Store: "mem://", Fallback: "mem://", NearCache: 10}, tiered: true, near: true},
		{cfg: setup.Config{Store: "mem://", Budget: time.Second, OnStoreError: idemkit.FailOpen}},
	} {
		st, err := setup.Build(ctx, c.cfg)
		if err != nil {
			t.Fatalf("Build(%v) = %v", c.cfg, err)
		}
		if (st.Tiered != nil) != c.tiered || (st.Near != nil) != c.near {
			t.Errorf("Build(%v): Tiered %v, Near %v", c.cfg, st.Tiered, st.Near)
		}
		e, err := st.NewEngine()
		if err != nil {
			t.Fatal(err)
		}
		runs := 0
		for range 3 {
			if _, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { runs++; return []byte("ok"), nil }); err != nil {
				t.Fatalf("Build(%v): Do = %v", c.cfg, err)
			}
		}
		if runs != 1 {
			t.Errorf("Build(%v): the work ran %d times", c.cfg, runs)
		}
		if err := st.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	}
}

// The failure mode reaches the engine: over a store that is down, fail-
// closed refuses the work, fail-open runs it each time, and a fallback
// guards it once its breaker opened (after at most
// tiered.DefaultFailureThreshold unavailable calls).
func TestBuildFailureModeAndFallback(t *testing.T) {
	ctx := context.Background()
	const attempts = tiered.DefaultFailureThreshold + 5
	for _, c := range []struct {
		cfg               setup.Config
		runs, unavailable int
	}{
		{setup.Config{Store: "testdown://"}, 0, attempts},
		{setup.Config{Store: "testdown://", OnStoreError: idemkit.FailOpen}, attempts, 0},
		{setup.Config{Store: "testdown://", Fallback: "mem://"}, 1, -1}, // -1: some, until the breaker opens
	} {
		st, err := setup.Build(ctx, c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		e, err := st.NewEngine(idemkit.WithObserver(nil))
		if err != nil {
			t.Fatal(err)
		}
		runs, unavailable := 0, 0
		for range attempts {
			_, err = e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { runs++; return []byte("ok"), nil })
			switch {
			case errors.Is(err, idemkit.ErrUnavailable):
				unavailable++
			case err != nil:
				t.Errorf("%v: Do = %v", c.cfg, err)
			}
		}
		if c.unavailable == -1 && unavailable >= 1 && unavailable <= tiered.DefaultFailureThreshold {
			unavailable = -1
		}
		if runs != c.runs || unavailable != c.unavailable {
			t.Errorf("%v: the work ran %d times and %d calls were unavailable, want %d and %d", c.cfg, runs, unavailable, c.runs, c.unavailable)
		}
		st.Close()
	}
}

func TestBuildBudgetDefaults(t *testing.T) {
	for _, c := range []struct {
		cfg  setup.Config
		want string
	}{
		{setup.Config{Store: "mem://"}, "mem://, on store error: closed"},
		{setup.Config{Store: "testdown://"}, "testdown:// (budget 1s)"},
		{setup.Config{Store: "testdown://", Budget: setup.NoBudget}, "testdown://, on"},
		{setup.Config{Store: "mem://", Budget: time.Second}, "mem:// (budget 1s)"},
		{setup.Config{Store: "testdown://u:" + secret + "@h", Fallback: "mem://?capacity=5", NearCache: 9, OnStoreError: idemkit.FailOpen},
			"testdown://u:xxxxx@h (budget 1s), fallback mem://?capacity=5, near cache of 9 keys, on store error: open"},
	} {
		st, err := setup.Build(context.Background(), c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.String(); !strings.Contains(got, c.want) || strings.Contains(got, secret) {
			t.Errorf("String() = %q, want it to contain %q", got, c.want)
		}
		st.Close()
	}
}

func TestBuildUsesConfigOpen(t *testing.T) {
	var opened []string
	cfg := setup.Config{Store: "mem://?capacity=10", Fallback: "mem://", Open: func(ctx context.Context, rawURL string) (store.Store, error) {
		opened = append(opened, rawURL)
		return store.Open(ctx, rawURL)
	}}
	st, err := setup.Build(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if strings.Join(opened, " ") != "mem://?capacity=10 mem://" {
		t.Errorf("Config.Open was called for %q", opened)
	}
}
