package storetest

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// invalidCases check that every operation rejects arguments the contract
// forbids with ErrInvalid, and changes nothing.
func invalidCases() []testCase {
	return []testCase{
		{name: "Invalid/SetNX", f: testInvalidSetNX},
		{name: "Invalid/Get", f: testInvalidGet},
		{name: "Invalid/CompareAndSwap", f: testInvalidCAS},
		{name: "Invalid/CompareAndDelete", f: testInvalidCAD},
		{name: "Invalid/Consume", f: testInvalidConsume},
	}
}

// Fixtures for the invalid-input cases: "k" holds "v"; "new" is absent.
var (
	longKey      = strings.Repeat("k", store.MaxKeyLen+1)
	badKeys      = []string{"", longKey}
	badTTLs      = []time.Duration{0, -time.Nanosecond, -time.Hour}
	presentValue = []byte("v")
)

const fixtureTTL = 10 * time.Second

// setupInvalid stores the fixture key "k" and returns a check that the
// store still holds exactly the fixture.
func setupInvalid(c *checker, s store.Store) (check func(), ok bool) {
	if !c.set(s, "k", presentValue, fixtureTTL) {
		return nil, false
	}
	return func() {
		if e, ok := c.holds(s, "k", presentValue, ruleInvalid); ok {
			c.ttlNear(e.TTL, fixtureTTL, ruleInvalid, `Get("k") after the invalid calls`)
		}
		c.absent(s, "new", ruleInvalid)
	}, true
}

// invalid checks that a call failed with ErrInvalid and reported false
// (or no value).
func (c *checker) invalid(err error, reported bool, call string) {
	c.isErr(err, store.ErrInvalid, ruleInvalid, call)
	c.expect(!reported, ruleInvalid, "%s reported success", call)
}

// claimArgs are the arguments of one claim (SetNX, SetNXValue).
type claimArgs struct {
	key   string
	value []byte
	ttl   time.Duration
}

// invalidClaims returns claims that every store must refuse with
// store.ErrInvalid: nil and oversized values, bad keys and bad TTLs, on an
// absent key ("new") and a present one ("k").
func invalidClaims() []claimArgs {
	oversized := make([]byte, store.MaxValueLen+1)
	calls := []claimArgs{{"new", nil, time.Hour}, {"k", nil, time.Hour}, {"new", oversized, time.Hour}}
	for _, k := range badKeys {
		calls = append(calls, claimArgs{k, []byte("x"), time.Hour})
	}
	for _, ttl := range badTTLs {
		calls = append(calls, claimArgs{"new", []byte("x"), ttl}, claimArgs{"k", []byte("x"), ttl})
	}
	return calls
}

func testInvalidSetNX(c *checker, s store.Store) {
	check, ok := setupInvalid(c, s)
	if !ok {
		return
	}
	for _, a := range invalidClaims() {
		set, _, err := s.SetNX(c.ctx, a.key, a.value, a.ttl)
		c.invalid(err, set, fmt.Sprintf("SetNX(key of %d bytes, %s, ttl %v)", len(a.key), describe(a.value), a.ttl))
	}
	check()
}

// describe names a value in a call without printing megabytes.
func describe(v []byte) string {
	if v == nil {
		return "nil value"
	}
	return fmt.Sprintf("value of %d bytes", len(v))
}

func testInvalidGet(c *checker, s store.Store) {
	check, ok := setupInvalid(c, s)
	if !ok {
		return
	}
	for _, k := range badKeys {
		e, err := s.Get(c.ctx, k)
		c.invalid(err, e.Value != nil, fmt.Sprintf("Get(key of %d bytes)", len(k)))
	}
	check()
}

func testInvalidCAS(c *checker, s store.Store) {
	check, ok := setupInvalid(c, s)
	if !ok {
		return
	}
	oversized := make([]byte, store.MaxValueLen+1)
	type args struct {
		key      string
		old, new []byte
		ttl      time.Duration
	}
	calls := []args{
		{"k", nil, []byte("x"), time.Hour},
		{"k", presentValue, nil, time.Hour},
		{"k", presentValue, oversized, time.Hour},
		{"new", nil, []byte("x"), time.Hour},
	}
	for _, k := range badKeys {
		calls = append(calls, args{k, presentValue, []byte("x"), time.Hour})
	}
	for _, ttl := range badTTLs {
		calls = append(calls, args{"k", presentValue, []byte("x"), ttl})
	}
	for _, a := range calls {
		ok, err := s.CompareAndSwap(c.ctx, a.key, a.old, a.new, a.ttl)
		c.invalid(err, ok, fmt.Sprintf("CompareAndSwap(key of %d bytes, old %s, new %s, ttl %v)",
			len(a.key), describe(a.old), describe(a.new), a.ttl))
	}
	check()
}

func testInvalidCAD(c *checker, s store.Store) {
	check, ok := setupInvalid(c, s)
	if !ok {
		return
	}
	ok, err := s.CompareAndDelete(c.ctx, "k", nil)
	c.invalid(err, ok, `CompareAndDelete("k", nil)`)
	for _, k := range badKeys {
		ok, err := s.CompareAndDelete(c.ctx, k, presentValue)
		c.invalid(err, ok, fmt.Sprintf("CompareAndDelete(key of %d bytes)", len(k)))
	}
	check()
}

func testInvalidConsume(c *checker, s store.Store) {
	check, ok := setupInvalid(c, s)
	if !ok {
		return
	}
	for _, k := range badKeys {
		v, err := s.Consume(c.ctx, k)
		c.invalid(err, v != nil, fmt.Sprintf("Consume(key of %d bytes)", len(k)))
	}
	check()
}
