package storetest

import "github.com/idemkit/idemkit/store"

// isolationCases check that values are copied in and out.
func isolationCases() []testCase {
	return []testCase{
		{name: "Isolation/SetNXInput", f: testIsolationSetNXIn},
		{name: "Isolation/CompareAndSwapInput", f: testIsolationCASIn},
		{name: "Isolation/GetOutput", f: testIsolationGetOut},
		{name: "Isolation/SetNXExistingOutput", f: testIsolationSetNXOut},
		{name: "Isolation/ConsumeOutput", f: testIsolationConsumeOut},
	}
}

// scribble overwrites every byte of b.
func scribble(b []byte) {
	for i := range b {
		b[i] = 'X'
	}
}

func testIsolationSetNXIn(c *checker, s store.Store) {
	in := []byte("original")
	if c.set(s, "k", in, longTTL) {
		scribble(in)
		c.holds(s, "k", []byte("original"), ruleCopy)
	}
}

func testIsolationCASIn(c *checker, s store.Store) {
	old, in := []byte("v1"), []byte("replaced")
	if c.set(s, "k", []byte("v1"), longTTL) && c.swap(s, "k", old, in, longTTL) {
		scribble(in)
		scribble(old)
		c.holds(s, "k", []byte("replaced"), ruleCopy)
	}
}

func testIsolationGetOut(c *checker, s store.Store) {
	if !c.set(s, "k", []byte("original"), longTTL) {
		return
	}
	if e, ok := c.holds(s, "k", []byte("original"), ruleGet); ok {
		scribble(e.Value)
		c.holds(s, "k", []byte("original"), ruleCopy)
	}
}

func testIsolationSetNXOut(c *checker, s store.Store) {
	if !c.set(s, "k", []byte("original"), longTTL) {
		return
	}
	set, existing, err := s.SetNX(c.ctx, "k", []byte("other"), longTTL)
	const call = `SetNX("k") of a present key`
	if c.noError(err, ruleSetNX, call) && c.expect(!set, ruleSetNX, "%s set it", call) {
		scribble(existing.Value)
		c.holds(s, "k", []byte("original"), ruleCopy)
	}
}

// testIsolationConsumeOut reads a value from several keys and then
// consumes one: scribbling on the consumed copy changes none of the others
// nor a copy read earlier.
func testIsolationConsumeOut(c *checker, s store.Store) {
	// want is rebuilt for every use, so that a store sharing one slice
	// between calls cannot scribble on the expected value too.
	const value = "sharedsharedsharedshared"
	want := func() []byte { return []byte(value) }
	if !c.set(s, "a", want(), longTTL) || !c.set(s, "b", want(), longTTL) {
		return
	}
	before, ok := c.holds(s, "a", want(), ruleGet)
	if !ok {
		return
	}
	v, err := s.Consume(c.ctx, "a")
	if !c.noError(err, ruleConsume, `Consume("a")`) {
		return
	}
	scribble(v)
	c.expect(string(before.Value) == value, ruleCopy,
		`scribbling on the value Consume("a") returned changed the value an earlier Get("a") returned`)
	c.holds(s, "b", want(), ruleCopy)
	if c.set(s, "a", want(), longTTL) {
		c.holds(s, "a", want(), ruleCopy)
	}
}
