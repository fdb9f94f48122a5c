package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/completer"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/boltstore"
)

const crashedKey = "http:order-CRASHED-4242"

// seedAbandoned writes into a bolt file what seed does, plus an operation
// that recorded the steps "reserve" and "charge" and then crashed, whose
// short lease has ended, and returns its URL.
func seedAbandoned(t *testing.T) string {
	t.Helper()
	url := seed(t)
	st, err := boltstore.Open(strings.TrimPrefix(url, "bolt://"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := idemkit.New(st, idemkit.WithObserver(nil), idemkit.WithLease(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, _, err := e.Begin(ctx, crashedKey, "fp", idemkit.WithScope(user), idemkit.WithoutHeartbeat())
	if err != nil || c == nil {
		t.Fatalf("Begin: %v", err)
	}
	for _, name := range []string{"reserve", "charge"} {
		if _, err := idemkit.Step(c.Context(ctx), name, func(context.Context) ([]byte, error) { return []byte("ok"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "the crashed claim's lease to end", func() bool {
		info, err := e.Inspect(ctx, idemkit.ModeDo, crashedKey, idemkit.WithScope(user))
		return err == nil && info.Lease == 0
	})
	return url
}

// abandoned lists the crashed operation with its two steps, by digests
// only, and not the running or completed ones; under the threshold it
// counts it as recent.
func TestAbandonedListsCrashedOperationsByDigest(t *testing.T) {
	url := seedAbandoned(t)
	code, out, errOut := ctl(t, "-store", url, "abandoned", "-older-than", "0s")
	if code != exitOK || !strings.Contains(out, "(1 abandoned older than 0s; 2 in progress, 0 whose lease ended more recently, of 3 keys)") {
		t.Fatalf("abandoned = %d\n%s%s", code, out, errOut)
	}
	noSecrets(t, out, errOut)
	if strings.Contains(out, "CRASHED") {
		t.Errorf("output holds the key:\n%s", out)
	}
	t.Logf("abandoned:\n%s", out)
	code, out, errOut = ctl(t, "-store", url, "-json", "abandoned", "-older-than", "0s")
	var v abandonedView
	if code != exitOK || json.Unmarshal([]byte(out), &v) != nil || len(v.Abandoned) != 1 || v.InProgress != 2 || v.Scanned != 3 {
		t.Fatalf("abandoned -json = %d %+v\n%s%s", code, v, out, errOut)
	}
	if r := v.Abandoned[0]; r.Steps != 2 || r.Fence == 0 || r.LastStepAt == "" || r.ScopeDigest == "" ||
		(r.LastStep != completer.StepDigest("charge") && r.LastStep != completer.StepDigest("reserve")) {
		t.Errorf("abandoned row %+v, want 2 steps, the last reserve or charge", r)
	}
	noSecrets(t, out, errOut)
	code, out, errOut = ctl(t, "-store", url, "abandoned")
	if code != exitOK || !strings.Contains(out, "(0 abandoned older than 1m0s; 2 in progress, 1 whose lease ended more recently, of 3 keys)") {
		t.Fatalf("abandoned, default threshold = %d\n%s%s", code, out, errOut)
	}
}

// With readable keys, abandoned prints the key and scope segments as
// digests.
func TestAbandonedHidesReadableKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.db")
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := idemkit.New(st, idemkit.WithObserver(nil), idemkit.WithReadableKeys(), idemkit.WithLease(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if c, _, err := e.Begin(ctx, crashedKey, "fp", idemkit.WithScope(user), idemkit.WithoutHeartbeat()); err != nil || c == nil {
		t.Fatalf("Begin: %v", err)
	}
	testkit.WaitFor(t, "the lease to end", func() bool {
		info, err := e.Inspect(ctx, idemkit.ModeDo, crashedKey, idemkit.WithScope(user))
		return err == nil && info.Lease == 0
	})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := ctl(t, "-store", "bolt://"+path, "-readable-keys", "abandoned", "-older-than", "0s")
	if code != exitOK || !strings.Contains(out, "sha256:") || !strings.Contains(out, "(1 abandoned") {
		t.Fatalf("abandoned = %d\n%s%s", code, out, errOut)
	}
	noSecrets(t, out, errOut)
}

func TestAbandonedUsage(t *testing.T) {
	for _, args := range [][]string{{"abandoned", "-older-than", "-1s"}, {"abandoned", "extra"}, {"abandoned", "-older-than", "soon"}} {
		if code, out, errOut := ctl(t, append([]string{"-store", "mem://"}, args...)...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s%s", args, code, exitUsage, out, errOut)
		}
	}
	if code, out, _ := ctl(t, "-store", "mem://", "abandoned"); code != exitOK || !strings.Contains(out, "(0 abandoned") {
		t.Errorf("abandoned on an empty store = %d\n%s", code, out)
	}
}
