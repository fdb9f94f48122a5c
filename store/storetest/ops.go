package storetest

import (
	"time"

	"github.com/idemkit/idemkit/store"
)

// opCases check the semantics of each operation on live keys.
func opCases() []testCase {
	return []testCase{
		{name: "SetNX/SetsWhenAbsent", f: testSetNXAbsent},
		{name: "SetNX/ReturnsExistingWhenPresent", f: testSetNXPresent},
		{name: "SetNX/EmptyValue", f: testSetNXEmptyValue},
		{name: "SetNX/MaxSizes", f: testSetNXMaxSizes},
		{name: "Get/Absent", f: testGetAbsent},
		{name: "CompareAndSwap/Absent", f: testCASAbsent},
		{name: "CompareAndSwap/Mismatch", f: testCASMismatch},
		{name: "CompareAndSwap/Match", f: testCASMatch},
		{name: "CompareAndSwap/EmptyValues", f: testCASEmpty},
		{name: "CompareAndDelete/Absent", f: testCADAbsent},
		{name: "CompareAndDelete/Mismatch", f: testCADMismatch},
		{name: "CompareAndDelete/Match", f: testCADMatch},
		{name: "Consume/Absent", f: testConsumeAbsent},
		{name: "Consume/Present", f: testConsumePresent},
		{name: "Consume/EmptyValue", f: testConsumeEmpty},
	}
}

func testSetNXAbsent(c *checker, s store.Store) {
	if !c.set(s, "k", []byte("v1"), 10*time.Second) {
		return
	}
	if e, ok := c.holds(s, "k", []byte("v1"), ruleSetNX); ok {
		c.ttlNear(e.TTL, 10*time.Second, ruleSetNX, `Get("k")`)
	}
}

func testSetNXPresent(c *checker, s store.Store) {
	if !c.set(s, "k", []byte("first"), 10*time.Second) {
		return
	}
	set, existing, err := s.SetNX(c.ctx, "k", []byte("second"), time.Hour)
	const call = `SetNX("k") of a key holding "first"`
	if c.noError(err, ruleSetNX, call) && c.expect(!set, ruleSetNX, "%s set it", call) &&
		c.expect(string(existing.Value) == "first", ruleSetNX, "%s returned existing value %q", call, existing.Value) {
		c.ttlNear(existing.TTL, 10*time.Second, ruleSetNX, call)
	}
	if e, ok := c.holds(s, "k", []byte("first"), ruleSetNX); ok {
		c.ttlNear(e.TTL, 10*time.Second, ruleSetNX, `Get("k")`)
	}
}

func testSetNXEmptyValue(c *checker, s store.Store) {
	if !c.set(s, "k", []byte{}, longTTL) {
		return
	}
	c.holds(s, "k", []byte{}, ruleValues)
	set, existing, err := s.SetNX(c.ctx, "k", []byte("other"), longTTL)
	const call = `SetNX("k") of a key holding an empty value`
	if c.noError(err, ruleSetNX, call) && c.expect(!set, ruleValues, "%s set it: an empty value is present, not absent", call) &&
		c.expect(existing.Value != nil && len(existing.Value) == 0, ruleValues,
			"%s returned existing value %#v, want an empty non-nil slice", call, existing.Value) {
		c.validTTL(existing.TTL, call)
	}
}

func testSetNXMaxSizes(c *checker, s store.Store) {
	key := string(make([]byte, store.MaxKeyLen))
	value := make([]byte, store.MaxValueLen)
	value[0], value[len(value)-1] = 1, 2
	if c.set(s, key, value, longTTL) {
		c.holds(s, key, value, ruleValues)
	}
}

func testGetAbsent(c *checker, s store.Store) {
	c.absent(s, "missing", ruleGet)
}

func testCASAbsent(c *checker, s store.Store) {
	ok, err := s.CompareAndSwap(c.ctx, "k", []byte("a"), []byte("b"), longTTL)
	const call = `CompareAndSwap("k") of an absent key`
	c.noError(err, ruleCAS, call)
	c.expect(!ok, ruleCAS, "%s reported true", call)
	c.absent(s, "k", ruleCAS)
}

func testCASMismatch(c *checker, s store.Store) {
	if !c.set(s, "k", []byte("abc"), 10*time.Second) {
		return
	}
	for _, old := range [][]byte{[]byte("abd"), []byte("ab"), []byte("abcd"), []byte("ABC"), {}} {
		ok, err := s.CompareAndSwap(c.ctx, "k", old, []byte("new"), time.Hour)
		c.noError(err, ruleCAS, "CompareAndSwap")
		c.expect(!ok, ruleCAS, "CompareAndSwap with old %q matched %q", old, "abc")
	}
	if e, ok := c.holds(s, "k", []byte("abc"), ruleCAS); ok {
		c.ttlNear(e.TTL, 10*time.Second, ruleCAS, `Get("k") after mismatched swaps`)
	}
}

func testCASMatch(c *checker, s store.Store) {
	if !c.set(s, "k", []byte("v1"), 10*time.Second) {
		return
	}
	steps := []struct {
		old, new string
		ttl      time.Duration
	}{{"v1", "v2", time.Hour}, {"v2", "v3", 5 * time.Second}, {"v3", "v3", 20 * time.Second}}
	for _, st := range steps {
		if !c.swap(s, "k", []byte(st.old), []byte(st.new), st.ttl) {
			return
		}
		e, ok := c.holds(s, "k", []byte(st.new), ruleCAS)
		if !ok || !c.ttlNear(e.TTL, st.ttl, ruleCAS, `Get("k") after CompareAndSwap to `+st.ttl.String()) {
			return
		}
	}
}

func testCASEmpty(c *checker, s store.Store) {
	if !c.set(s, "k", []byte{}, longTTL) || !c.swap(s, "k", []byte{}, []byte("x"), longTTL) {
		return
	}
	c.holds(s, "k", []byte("x"), ruleCAS)
	if c.swap(s, "k", []byte("x"), []byte{}, longTTL) {
		c.holds(s, "k", []byte{}, ruleCAS)
	}
}

func testCADAbsent(c *checker, s store.Store) {
	ok, err := s.CompareAndDelete(c.ctx, "k", []byte("a"))
	const call = `CompareAndDelete("k") of an absent key`
	c.noError(err, ruleCAD, call)
	c.expect(!ok, ruleCAD, "%s reported true", call)
}

func testCADMismatch(c *checker, s store.Store) {
	if !c.set(s, "k", []byte("abc"), longTTL) {
		return
	}
	for _, old := range [][]byte{[]byte("abd"), []byte("ab"), []byte("abcd"), {}} {
		ok, err := s.CompareAndDelete(c.ctx, "k", old)
		c.noError(err, ruleCAD, "CompareAndDelete")
		c.expect(!ok, ruleCAD, "CompareAndDelete with old %q matched %q", old, "abc")
	}
	c.holds(s, "k", []byte("abc"), ruleCAD)
}

func testCADMatch(c *checker, s store.Store) {
	if !c.set(s, "k", []byte("abc"), longTTL) || !c.set(s, "e", []byte{}, longTTL) {
		return
	}
	for _, kv := range []struct{ key, old string }{{"k", "abc"}, {"e", ""}} {
		ok, err := s.CompareAndDelete(c.ctx, kv.key, []byte(kv.old))
		c.noError(err, ruleCAD, "CompareAndDelete")
		c.expect(ok, ruleCAD, "CompareAndDelete(%q, %q) of a key holding %[2]q reported false", kv.key, kv.old)
		c.absent(s, kv.key, ruleCAD)
		ok, err = s.CompareAndDelete(c.ctx, kv.key, []byte(kv.old))
		c.noError(err, ruleCAD, "CompareAndDelete")
		c.expect(!ok, ruleCAD, "second CompareAndDelete(%q) reported true", kv.key)
	}
	c.set(s, "k", []byte("again"), longTTL)
}

func testConsumeAbsent(c *checker, s store.Store) {
	v, err := s.Consume(c.ctx, "k")
	c.isErr(err, store.ErrNotFound, ruleConsume, `Consume("k") of an absent key`)
	c.expect(v == nil, ruleConsume, `Consume("k") of an absent key returned %q`, v)
}

func testConsumePresent(c *checker, s store.Store) {
	if !c.set(s, "k", []byte("token"), longTTL) {
		return
	}
	v, err := s.Consume(c.ctx, "k")
	c.noError(err, ruleConsume, `Consume("k")`)
	c.expect(string(v) == "token", ruleConsume, `Consume("k") = %q, want "token"`, v)
	c.absent(s, "k", ruleConsume)
	_, err = s.Consume(c.ctx, "k")
	c.isErr(err, store.ErrNotFound, ruleConsume, `second Consume("k")`)
	c.set(s, "k", []byte("again"), longTTL)
}

func testConsumeEmpty(c *checker, s store.Store) {
	if !c.set(s, "k", []byte{}, longTTL) {
		return
	}
	v, err := s.Consume(c.ctx, "k")
	c.noError(err, ruleConsume, `Consume("k")`)
	c.expect(v != nil && len(v) == 0, ruleValues, `Consume("k") of an empty value = %#v, want an empty non-nil slice`, v)
	c.absent(s, "k", ruleConsume)
}
