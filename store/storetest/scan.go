package storetest

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// scanCases check store.Scanner; Run skips them for other stores.
func scanCases() []testCase {
	return []testCase{
		{name: "Scan/PrefixLiveOnce", f: scanned(testScanPrefix), scan: true},
		{name: "Scan/StopEarly", f: scanned(testScanStop), scan: true},
		{name: "Scan/Isolation", f: scanned(testScanIsolation), scan: true},
	}
}

type scanStore interface {
	store.Store
	store.Scanner
}

func scanned(f func(c *checker, s scanStore)) func(c *checker, s store.Store) {
	return func(c *checker, s store.Store) { f(c, s.(scanStore)) }
}

// testScanPrefix writes more keys than one page of most backends under a
// prefix, a few beside it and one that expires, and expects to see every
// live key under the prefix exactly once, with its value.
func testScanPrefix(c *checker, s scanStore) {
	const n = 600
	want := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("scan:a:%04d", i), fmt.Sprintf("v%d", i)
		want[k] = v
		c.set(s, k, []byte(v), longTTL)
	}
	for i := range 5 {
		c.set(s, fmt.Sprintf("scan:b:%d", i), []byte("other"), longTTL)
	}
	c.set(s, "scan:a:expiring", []byte("gone"), time.Millisecond)
	c.sleep(20 * time.Millisecond)
	seen := map[string]int{}
	err := s.Scan(c.ctx, "scan:a:", func(key string, ent store.Entry) bool {
		seen[key]++
		if w, ok := want[key]; ok {
			c.expect(string(ent.Value) == w, ruleScan, "Scan gave %s = %s, want %q", show(key), show(ent.Value), w)
			c.validTTL(ent.TTL, "Scan of "+show(key))
		} else {
			c.expect(false, ruleScan, "Scan(%q) gave %s, which is not a live key under the prefix", "scan:a:", show(key))
		}
		return true
	})
	if !c.noError(err, ruleScan, `Scan("scan:a:")`) {
		return
	}
	missing, twice := 0, 0
	for k := range want {
		switch seen[k] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	c.expect(missing == 0 && twice == 0, ruleScan, "Scan of %d live keys missed %d and gave %d more than once", n, missing, twice)
}

// testScanStop expects Scan to stop as soon as fn returns false.
func testScanStop(c *checker, s scanStore) {
	for i := range 10 {
		c.set(s, fmt.Sprintf("stop:%d", i), []byte("v"), longTTL)
	}
	calls := 0
	err := s.Scan(c.ctx, "stop:", func(string, store.Entry) bool { calls++; return calls < 3 })
	if c.noError(err, ruleScan, `Scan("stop:")`) {
		c.expect(calls == 3, ruleScan, "Scan called fn %d times after it returned false on the 3rd", calls)
	}
}

// testScanIsolation expects Scan's values to be copies.
func testScanIsolation(c *checker, s scanStore) {
	c.set(s, "iso:k", []byte("value"), longTTL)
	err := s.Scan(c.ctx, "iso:", func(_ string, ent store.Entry) bool {
		for i := range ent.Value {
			ent.Value[i] = 'X'
		}
		return true
	})
	if c.noError(err, ruleScan, `Scan("iso:")`) {
		e, err := s.Get(c.ctx, "iso:k")
		if c.noError(err, ruleGet, `Get("iso:k")`) {
			c.expect(!strings.Contains(string(e.Value), "X"), ruleScan, "changing a value Scan returned changed the stored one: %s", show(e.Value))
		}
	}
}
