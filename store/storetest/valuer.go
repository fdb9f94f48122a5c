package storetest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/idemkit/idemkit/store"
)

// valuerCases check store.SetNXValuer; Run skips them for other stores.
func valuerCases() []testCase {
	return []testCase{
		{name: "SetNXValue/AbsentThenPresent", f: valued(testValueAbsentPresent), valuer: true},
		{name: "SetNXValue/EmptyValue", f: valued(testValueEmpty), valuer: true},
		{name: "SetNXValue/Expiry", f: valued(testValueExpiry), valuer: true},
		{name: "SetNXValue/Invalid", f: valued(testValueInvalid), valuer: true},
		{name: "SetNXValue/Isolation", f: valued(testValueIsolation), valuer: true},
		{name: "SetNXValue/Context", f: valued(testValueCtx), valuer: true},
		{name: "Race/SetNXValueOneWinner", f: valued(testRaceValue), valuer: true},
		{name: "Race/LockstepSetNXValue", f: valued(testLockstepValue), valuer: true},
	}
}

// valuerStore is a Store that implements store.SetNXValuer.
type valuerStore interface {
	store.Store
	store.SetNXValuer
}

// valued adapts a SetNXValue case to a testCase; cases() marks it so that
// it only runs against a store.SetNXValuer.
func valued(f func(c *checker, s valuerStore)) func(c *checker, s store.Store) {
	return func(c *checker, s store.Store) { f(c, s.(valuerStore)) }
}

// setValue calls SetNXValue on an absent key, which must store value.
func (c *checker) setValue(s valuerStore, key string, value []byte, ttl time.Duration) bool {
	set, existing, err := s.SetNXValue(c.ctx, key, value, ttl)
	call := fmt.Sprintf("SetNXValue(%s) of an absent key", show(key))
	return c.noError(err, ruleSetNXValue, call) && c.expect(set, ruleSetNXValue, "%s did not set", call) &&
		c.expect(existing == nil, ruleSetNXValue, "%s stored and returned existing value %s, want nil", call, show(existing))
}

// heldValue calls SetNXValue on key, which must hold want: it must not
// store and must return want.
func (c *checker) heldValue(s valuerStore, key string, want []byte) ([]byte, bool) {
	set, existing, err := s.SetNXValue(c.ctx, key, []byte("other"), time.Hour)
	call := fmt.Sprintf("SetNXValue(%s) of a key holding %s", show(key), show(want))
	ok := c.noError(err, ruleSetNXValue, call) && c.expect(!set, ruleSetNXValue, "%s set it", call) &&
		c.expect(existing != nil && string(existing) == string(want), ruleSetNXValue,
			"%s returned existing value %#v, want %s", call, existing, show(want))
	return existing, ok
}

func testValueAbsentPresent(c *checker, s valuerStore) {
	if !c.setValue(s, "k", []byte("first"), 10*time.Second) {
		return
	}
	if e, ok := c.holds(s, "k", []byte("first"), ruleSetNXValue); ok {
		c.ttlNear(e.TTL, 10*time.Second, ruleSetNXValue, `Get("k") after SetNXValue`)
	}
	if _, ok := c.heldValue(s, "k", []byte("first")); !ok {
		return
	}
	// The losing call changed neither the value nor its TTL, and SetNX
	// sees what SetNXValue stored.
	set, e, err := s.SetNX(c.ctx, "k", []byte("third"), time.Hour)
	const call = `SetNX("k") of a key SetNXValue stored`
	if c.noError(err, ruleSetNX, call) && c.expect(!set, ruleSetNXValue, "%s set it", call) &&
		c.expect(string(e.Value) == "first", ruleSetNXValue, "%s returned existing value %q", call, e.Value) {
		c.ttlNear(e.TTL, 10*time.Second, ruleSetNXValue, call)
	}
	// And SetNXValue sees what SetNX stored.
	if c.set(s, "nx", []byte("by SetNX"), longTTL) {
		c.heldValue(s, "nx", []byte("by SetNX"))
	}
}

func testValueEmpty(c *checker, s valuerStore) {
	if c.setValue(s, "k", []byte{}, longTTL) {
		c.holds(s, "k", []byte{}, ruleValues)
		c.heldValue(s, "k", []byte{})
	}
}

// testValueExpiry checks that SetNXValue keeps the TTL it is given, as
// SetNX does, and that it finds an expired entry absent.
func testValueExpiry(c *checker, s valuerStore) {
	v := []byte("v")
	if !c.setValue(s, "short", v, shortTTL) || !c.set(s, "expired", v, shortTTL) ||
		!c.setValue(s, "live", v, 10*time.Second) {
		return
	}
	c.sleep(expirySleep)

	c.absent(s, "short", ruleExpired)
	if c.setValue(s, "expired", []byte("fresh"), 10*time.Second) {
		if e, ok := c.holds(s, "expired", []byte("fresh"), ruleExpired); ok {
			c.ttlNear(e.TTL, 10*time.Second, ruleSetNXValue, `Get("expired") after SetNXValue`)
		}
	}
	c.heldValue(s, "live", v)
	if e, ok := c.holds(s, "live", v, ruleGet); ok {
		c.expect(e.TTL <= 10*time.Second-expirySleep, ruleEntryTTL,
			`Get("live") %v after SetNXValue with a 10s TTL reported TTL %v: it must count down`, expirySleep, e.TTL)
	}
	// Sub-millisecond TTLs round up to a whole millisecond, as SetNX's do.
	if c.setValue(s, "ns", v, time.Nanosecond) {
		e, err := s.Get(c.ctx, "ns")
		if err == nil {
			c.validTTL(e.TTL, `Get("ns") after SetNXValue with a 1ns TTL`)
		}
	}
}

func testValueInvalid(c *checker, s valuerStore) {
	check, ok := setupInvalid(c, s)
	if !ok {
		return
	}
	for _, a := range invalidClaims() {
		set, existing, err := s.SetNXValue(c.ctx, a.key, a.value, a.ttl)
		c.invalid(err, set || existing != nil, fmt.Sprintf("SetNXValue(key of %d bytes, %s, ttl %v)", len(a.key), describe(a.value), a.ttl))
	}
	check()
}

func testValueIsolation(c *checker, s valuerStore) {
	in := []byte("original")
	if !c.setValue(s, "k", in, longTTL) {
		return
	}
	scribble(in)
	if _, ok := c.holds(s, "k", []byte("original"), ruleCopy); !ok {
		return
	}
	if existing, ok := c.heldValue(s, "k", []byte("original")); ok {
		scribble(existing)
		c.holds(s, "k", []byte("original"), ruleCopy)
	}
}

// testValueCtx checks SetNXValue under a done context, as the Context
// cases check the other operations.
func testValueCtx(c *checker, s valuerStore) {
	cancelled, cancel := context.WithCancel(c.ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(c.ctx, time.Now().Add(-time.Second))
	defer cancel2()
	for i, ctx := range []context.Context{cancelled, expired} {
		key := "nx" + strconv.Itoa(i)
		set, _, err := s.SetNXValue(ctx, key, []byte("v"), longTTL)
		if c.ctxErr(ctx, err, "SetNXValue") {
			c.absent(s, key, ruleCtx)
			continue
		}
		if c.expect(set, ruleSetNXValue, "SetNXValue(%q) of an absent key under a done context succeeded without setting", key) {
			c.holds(s, key, []byte("v"), ruleSetNXValue)
		}
	}
}

// testRaceValue races SetNXValue against SetNX at one key: half the
// racers call each, and exactly one of all of them stores; every loser
// sees the winner's value.
func testRaceValue(c *checker, s valuerStore) {
	for r := range rounds {
		key := roundKey("nxv", r)
		won, errs := make([]bool, racers), make([]error, racers)
		seen := make([][]byte, racers)
		race(racers, func(i int) {
			if i%2 == 0 {
				won[i], seen[i], errs[i] = s.SetNXValue(c.ctx, key, racerValue(i), longTTL)
				return
			}
			var e store.Entry
			won[i], e, errs[i] = s.SetNX(c.ctx, key, racerValue(i), longTTL)
			seen[i] = e.Value
		})
		w := c.oneWinner(won, errs, ruleAtomic, "SetNXValue and SetNX("+strconv.Quote(key)+") from "+strconv.Itoa(racers)+" goroutines")
		if w < 0 {
			return
		}
		for i, v := range seen {
			if i != w && !c.expect(string(v) == string(racerValue(w)), ruleSetNXValue,
				"losing racer %d returned existing value %q, want the winner's %q", i, v, racerValue(w)) {
				return
			}
		}
		if _, ok := c.holds(s, key, racerValue(w), ruleAtomic); !ok {
			return
		}
	}
}

// testLockstepValue races SetNXValue (and SetNX, on odd racers) in
// lockstep over many keys, which catches a read-then-write on an
// in-process store.
func testLockstepValue(c *checker, s valuerStore) {
	c.lockstep(lockstepRace{prefix: "lsnxv", settle: removeIfHolds(c, s), op: func(i int, key string) (bool, error) {
		if i%2 == 1 {
			set, _, err := s.SetNX(c.ctx, key, racerValue(i), longTTL)
			return set, err
		}
		set, _, err := s.SetNXValue(c.ctx, key, racerValue(i), longTTL)
		return set, err
	}}, ruleAtomic, "SetNXValue")
}
