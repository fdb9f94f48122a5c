package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Violation is one broken contract rule, as Check reports it.
type Violation struct {
	Case   string // the case that found it, named as Run names the subtest
	Rule   string // the rule broken, quoted from package store's documentation
	Detail string // what the store did
}

// Error returns the case, the detail and the quoted rule on one line.
func (v *Violation) Error() string {
	return "storetest: " + v.Case + ": " + v.message()
}

// message is the report without the case name, which t.Run already gives.
func (v *Violation) message() string {
	return fmt.Sprintf("%s; contract: %q", v.Detail, v.Rule)
}

// Run runs the conformance suite as subtests of t, reporting each broken
// rule with t.Error. newStore is called once per subtest, with that
// subtest's t, and must return a fresh, empty store; it registers its own
// cleanup (closing the store, say) with t.Cleanup. Subtests run
// sequentially; the batch, scan and SetNXValue cases are skipped unless the
// store implements store.Batcher, store.Scanner and store.SetNXValuer.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if s == nil {
				t.Fatal("storetest: newStore returned nil")
			}
			if tc.batch && !isBatcher(s) {
				t.Skip("storetest: the store does not implement store.Batcher")
			}
			if tc.scan && !isScanner(s) {
				t.Skip("storetest: the store does not implement store.Scanner")
			}
			if tc.valuer && !isValuer(s) {
				t.Skip("storetest: the store does not implement store.SetNXValuer")
			}
			c := &checker{ctx: t.Context(), name: tc.name, start: time.Now(), report: func(v *Violation) { t.Error(v.message()) }}
			tc.f(c, s)
		})
	}
}

// Check runs the conformance suite outside go test and returns the
// violations it finds, each a *Violation, joined with errors.Join; nil
// means the store passed. newStore is called once per case and must return
// a fresh, empty store; Check closes it when the case ends if it
// implements store.Closer (a failed Close is returned too). Check stops
// when newStore fails or ctx is done, and returns that error as well.
func Check(ctx context.Context, newStore func() (store.Store, error)) error {
	var errs []error
	for _, tc := range cases() {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, fmt.Errorf("storetest: stopped before %s: %w", tc.name, err))...)
		}
		found, err := checkCase(ctx, tc, newStore)
		errs = append(errs, found...)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	return errors.Join(errs...)
}

// checkCase runs one case for Check. It returns the violations found and
// an error that stops Check: a failing constructor or a done ctx (which
// discards the case's violations, since they may be its effect).
func checkCase(ctx context.Context, tc testCase, newStore func() (store.Store, error)) (found []error, stop error) {
	s, err := newStore()
	switch {
	case err != nil:
		return nil, fmt.Errorf("storetest: %s: newStore: %w", tc.name, err)
	case s == nil:
		return nil, fmt.Errorf("storetest: %s: newStore returned nil", tc.name)
	case tc.batch && !isBatcher(s), tc.scan && !isScanner(s), tc.valuer && !isValuer(s):
		return closeStore(tc.name, s), nil
	}
	var mu sync.Mutex
	c := &checker{ctx: ctx, name: tc.name, start: time.Now(), report: func(v *Violation) {
		mu.Lock()
		defer mu.Unlock()
		found = append(found, v)
	}}
	tc.f(c, s)
	found = append(found, closeStore(tc.name, s)...)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storetest: stopped during %s: %w", tc.name, err)
	}
	return found, nil
}

// closeStore closes s if it implements store.Closer, and returns the
// error of a failed Close.
func closeStore(name string, s store.Store) []error {
	if cl, ok := s.(store.Closer); ok {
		if err := cl.Close(); err != nil {
			return []error{fmt.Errorf("storetest: %s: Close: %w", name, err)}
		}
	}
	return nil
}

func isBatcher(s store.Store) bool {
	_, ok := s.(store.Batcher)
	return ok
}

func isScanner(s store.Store) bool {
	_, ok := s.(store.Scanner)
	return ok
}

func isValuer(s store.Store) bool {
	_, ok := s.(store.SetNXValuer)
	return ok
}

// testCase is one named conformance check, run against a fresh store.
// A batch case runs only against a store.Batcher.
type testCase struct {
	name   string
	f      func(c *checker, s store.Store)
	batch  bool
	scan   bool // runs only against a store.Scanner
	valuer bool // runs only against a store.SetNXValuer
}

func cases() []testCase {
	var all []testCase
	for _, group := range [][]testCase{
		opCases(), invalidCases(), ttlCases(), isolationCases(), keyCases(),
		raceCases(), lockstepCases(), ctxCases(), batchCases(), scanCases(),
		valuerCases(),
	} {
		all = append(all, group...)
	}
	return all
}

// checker is the state of one running case: the context of its calls and
// where its violations go. It is safe for concurrent use.
type checker struct {
	ctx    context.Context
	name   string
	start  time.Time // when the case began, before anything it set
	report func(*Violation)
}

// errorf reports a broken rule; the case goes on.
func (c *checker) errorf(rule, format string, args ...any) {
	c.report(&Violation{Case: c.name, Rule: rule, Detail: fmt.Sprintf(format, args...)})
}

// expect reports a broken rule unless ok, and returns ok.
func (c *checker) expect(ok bool, rule, format string, args ...any) bool {
	if !ok {
		c.errorf(rule, format, args...)
	}
	return ok
}

// noError reports err, if any, as breaking rule, and returns err == nil.
func (c *checker) noError(err error, rule, call string) bool {
	return c.expect(err == nil, rule, "%s failed: %v", call, err)
}

// isErr reports a broken rule unless err wraps target.
func (c *checker) isErr(err, target error, rule, call string) bool {
	return c.expect(errors.Is(err, target), rule, "%s returned error %v, want one wrapping %v", call, err, target)
}

// longTTL is a TTL no case outlives.
const longTTL = 10 * time.Minute

// set stores value under an absent key, reporting a failure.
func (c *checker) set(s store.Store, key string, value []byte, ttl time.Duration) bool {
	set, _, err := s.SetNX(c.ctx, key, value, ttl)
	call := fmt.Sprintf("SetNX(%s) of an absent key", show(key))
	return c.noError(err, ruleSetNX, call) && c.expect(set, ruleSetNX, "%s did not set", call)
}

// swap performs a CompareAndSwap that must succeed.
func (c *checker) swap(s store.Store, key string, old, new []byte, ttl time.Duration) bool {
	ok, err := s.CompareAndSwap(c.ctx, key, old, new, ttl)
	call := fmt.Sprintf("CompareAndSwap(%q, %q, %q) of a key holding %[2]q", key, old, new)
	return c.noError(err, ruleCAS, call) && c.expect(ok, ruleCAS, "%s reported false", call)
}

// holds checks that key holds want, citing rule when it does not, and
// returns its entry.
func (c *checker) holds(s store.Store, key string, want []byte, rule string) (store.Entry, bool) {
	e, err := s.Get(c.ctx, key)
	call := fmt.Sprintf("Get(%s)", show(key))
	ok := c.noError(err, rule, call) &&
		c.expect(e.Value != nil, ruleGet, "%s returned a nil value", call) &&
		c.expect(string(e.Value) == string(want), rule, "%s = %s, want %s", call, show(e.Value), show(want)) &&
		c.validTTL(e.TTL, call)
	return e, ok
}

// absent checks that Get reports key as not found, citing rule when it
// does not.
func (c *checker) absent(s store.Store, key, rule string) bool {
	e, err := s.Get(c.ctx, key)
	call := fmt.Sprintf("Get(%s)", show(key))
	if err == nil {
		return c.expect(false, rule, "%s = %s, want the key absent", call, show(e.Value))
	}
	return c.isErr(err, store.ErrNotFound, rule, call) &&
		c.expect(e.Value == nil, ruleGet, "%s of an absent key returned a value", call)
}

// validTTL checks the rules for a reported TTL: positive and a whole
// number of milliseconds.
func (c *checker) validTTL(ttl time.Duration, call string) bool {
	return c.expect(ttl > 0 && ttl%time.Millisecond == 0, ruleEntryTTL,
		"%s reported TTL %v, want a positive whole number of milliseconds", call, ttl)
}

// ttlNear checks a reported TTL against the want set during this case,
// citing rule, the rule of the operation that set it, when it is not: at
// most want, and no lower than want less the time the case has run (plus
// a second for the store's clock resolution), so a loaded machine that
// slows the case down never fails a correct store.
func (c *checker) ttlNear(got, want time.Duration, rule, call string) bool {
	floor := want - time.Second - time.Since(c.start)
	return c.validTTL(got, call) && c.expect(got <= want && got > floor, rule,
		"%s reported TTL %v, want at most the %v set and above %v (the case has run %v)", call, got, want, floor, time.Since(c.start).Round(time.Millisecond))
}

// show quotes a key or value for a report, eliding the middle of a long
// one.
func show[B []byte | string](b B) string {
	const keep = 24
	if len(b) <= 2*keep {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q...%q (%d bytes)", b[:keep], b[len(b)-keep:], len(b))
}

// sleep waits for d or until the case's context is done.
func (c *checker) sleep(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-c.ctx.Done():
	}
}
