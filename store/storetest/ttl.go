package storetest

import (
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Short TTLs for expiry tests: entries set with shortTTL are gone after
// expirySleep, which leaves ample slack for a slow setup.
const (
	shortTTL    = 150 * time.Millisecond
	expirySleep = 300 * time.Millisecond
)

// ttlCases check expiry and remaining-TTL reporting.
func ttlCases() []testCase {
	return []testCase{
		{name: "TTL/ExpiredIsAbsentForEveryOp", f: testExpiry},
		{name: "TTL/SubMillisecondRoundsUp", f: testSubMillisecond},
		{name: "TTL/Reporting", f: testTTLReporting},
	}
}

func testExpiry(c *checker, s store.Store) {
	v := []byte("v")
	// "extend" is extended right after it is set, so that a slow remote
	// store has all of shortTTL to make the second call.
	ok := c.set(s, "extend", v, shortTTL) && c.swap(s, "extend", v, v, longTTL)
	for _, k := range []string{"get", "consume", "cas", "cad", "nx"} {
		ok = ok && c.set(s, k, v, shortTTL)
	}
	ok = ok && c.set(s, "shorten", v, longTTL) && c.set(s, "live", v, 10*time.Second) &&
		c.swap(s, "shorten", v, v, shortTTL)
	if !ok {
		return
	}

	c.sleep(expirySleep)

	c.absent(s, "get", ruleExpired)
	_, err := s.Consume(c.ctx, "consume")
	c.isErr(err, store.ErrNotFound, ruleExpired, `Consume("consume") of an expired key`)
	swapped, err := s.CompareAndSwap(c.ctx, "cas", v, []byte("w"), longTTL)
	c.noError(err, ruleExpired, `CompareAndSwap("cas") of an expired key`)
	c.expect(!swapped, ruleExpired, `CompareAndSwap("cas") of an expired key reported true`)
	c.absent(s, "cas", ruleExpired)
	deleted, err := s.CompareAndDelete(c.ctx, "cad", v)
	c.noError(err, ruleExpired, `CompareAndDelete("cad") of an expired key`)
	c.expect(!deleted, ruleExpired, `CompareAndDelete("cad") of an expired key reported true`)

	set, _, err := s.SetNX(c.ctx, "nx", []byte("fresh"), 10*time.Second)
	c.noError(err, ruleExpired, `SetNX("nx") of an expired key`)
	if c.expect(set, ruleExpired, `SetNX("nx") of an expired key did not set`) {
		if e, ok := c.holds(s, "nx", []byte("fresh"), ruleExpired); ok {
			c.ttlNear(e.TTL, 10*time.Second, ruleSetNX, `Get("nx")`)
		}
	}

	c.absent(s, "shorten", ruleCAS)
	c.holds(s, "extend", v, ruleCAS)
	if e, ok := c.holds(s, "live", v, ruleGet); ok {
		c.expect(e.TTL <= 10*time.Second-expirySleep, ruleEntryTTL,
			`Get("live") %v after setting a 10s TTL reported TTL %v: it must count down`, expirySleep, e.TTL)
	}
}

func testSubMillisecond(c *checker, s store.Store) {
	ttls := []time.Duration{time.Nanosecond, 999 * time.Microsecond, 1500 * time.Microsecond}
	keys := []string{"ns", "us", "frac"}
	for i, ttl := range ttls {
		call := fmt.Sprintf("SetNX(%q, ttl %v)", keys[i], ttl)
		set, _, err := s.SetNX(c.ctx, keys[i], []byte("v"), ttl)
		if !c.noError(err, ruleTTLRound, call) || !c.expect(set, ruleSetNX, "%s of an absent key did not set", call) {
			continue
		}
		e, err := s.Get(c.ctx, keys[i])
		if err != nil {
			c.isErr(err, store.ErrNotFound, ruleGet, "Get("+keys[i]+")")
			continue
		}
		c.validTTL(e.TTL, "Get("+keys[i]+")")
		c.expect(e.TTL <= store.RoundTTL(ttl), ruleTTLRound, "Get(%q) reported TTL %v after %s", keys[i], e.TTL, call)
	}
	if c.set(s, "cas", []byte("v"), longTTL) {
		ok, err := s.CompareAndSwap(c.ctx, "cas", []byte("v"), []byte("w"), time.Nanosecond)
		const call = `CompareAndSwap("cas", ttl 1ns)`
		c.noError(err, ruleTTLRound, call)
		c.expect(ok, ruleCAS, "%s of a key holding the old value reported false", call)
	}

	c.sleep(20 * time.Millisecond)
	for _, k := range append(keys, "cas") {
		c.absent(s, k, ruleTTLRound)
	}
}

func testTTLReporting(c *checker, s store.Store) {
	ttls := []struct {
		key string
		ttl time.Duration
	}{{"whole", 10 * time.Second}, {"frac", 10*time.Second + time.Nanosecond}, {"century", 100 * 365 * 24 * time.Hour}}
	for _, kt := range ttls {
		want := store.RoundTTL(kt.ttl)
		if !c.set(s, kt.key, []byte(kt.key), kt.ttl) {
			continue
		}
		if e, ok := c.holds(s, kt.key, []byte(kt.key), ruleGet); ok {
			c.ttlNear(e.TTL, want, ruleTTLRound, fmt.Sprintf("Get(%q) of a key set with TTL %v", kt.key, kt.ttl))
		}
		set, existing, err := s.SetNX(c.ctx, kt.key, []byte("other"), time.Second)
		call := fmt.Sprintf("SetNX(%q) of a key set with TTL %v", kt.key, kt.ttl)
		if c.noError(err, ruleSetNX, call) && c.expect(!set, ruleSetNX, "%s set it", call) {
			c.ttlNear(existing.TTL, want, ruleTTLRound, call)
		}
	}
	if c.swap(s, "century", []byte("century"), []byte("c2"), 3*time.Second) {
		if e, ok := c.holds(s, "century", []byte("c2"), ruleCAS); ok {
			c.ttlNear(e.TTL, 3*time.Second, ruleCAS, `Get("century") after CompareAndSwap to 3s`)
		}
	}
}
