package storetest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

// checkDeadline bounds one Check of a refStore, which takes about two
// seconds even on a loaded machine: a suite that loops on a broken store
// must end with a report, not hang until go test's timeout.
const checkDeadline = time.Minute

// violations runs Check against refStores with faults f and returns what
// it found, failing the test on an error that is not a violation (Check
// stopped by checkDeadline among them).
func violations(t *testing.T, f faults) []*storetest.Violation {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), checkDeadline)
	defer cancel()
	err := storetest.Check(ctx, func() (store.Store, error) { return newRefStore(f), nil })
	var found []*storetest.Violation
	for _, e := range unjoin(err) {
		var v *storetest.Violation
		if !errors.As(e, &v) {
			t.Fatalf("Check returned an error that is not a *Violation: %v", e)
		}
		found = append(found, v)
	}
	return found
}

// unjoin lists the errors errors.Join combined into err.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}

// TestCheckReportsEachBrokenRule runs Check against stores that each break
// one rule, and requires a violation of that rule, quoting it, from the
// cases meant to catch it (for a race, from at least one of them).
func TestCheckReportsEachBrokenRule(t *testing.T) {
	tests := []struct {
		name  string
		f     faults
		rule  string     // a phrase of the rule that must be quoted
		cases []string   // every one must report it
		anyOf [][]string // and at least one case of each group
	}{
		{"GetThenSet", faults{getThenSet: true}, "atomically", nil,
			[][]string{{"Race/SetNXOneWinner", "Race/LockstepSetNX"}, {"Batch/RaceOverlapping", "Batch/RaceWithSetNX"},
				{"Race/SetNXValueOneWinner", "Race/LockstepSetNXValue"}}},
		{"SharedValues", faults{shareValues: true}, "copied on the way in and on the way out",
			[]string{"Isolation/SetNXInput", "Isolation/CompareAndSwapInput", "Isolation/GetOutput",
				"Isolation/SetNXExistingOutput", "Isolation/ConsumeOutput", "Batch/Isolation", "SetNXValue/Isolation"}, nil},
		{"IgnoredTTL", faults{ignoreTTL: true}, "expired entry is absent",
			[]string{"TTL/ExpiredIsAbsentForEveryOp", "Batch/MixedNewHeldExpired", "SetNXValue/Expiry"}, nil},
		{"AcceptedInvalid", faults{acceptInvalid: true}, "ErrInvalid",
			[]string{"Invalid/SetNX", "Invalid/Get", "Invalid/CompareAndSwap", "Invalid/CompareAndDelete", "Invalid/Consume",
				"SetNXValue/Invalid"}, nil},
		{"SwapKeepsTTL", faults{casKeepsTTL: true}, "and its TTL with ttl", []string{"CompareAndSwap/Match"}, nil},
		{"SwapComparesNew", faults{casComparesNew: true}, "only if the current value equals old",
			[]string{"CompareAndSwap/Match", "Race/StaleValueNeverWins", "Race/CompareAndSwapCounter"}, nil},
		{"ConsumeKeeps", faults{consumeKeeps: true}, "Consume deletes key",
			[]string{"Consume/Present", "Consume/EmptyValue", "Race/ConsumeOneWinner", "Race/LockstepConsume"}, nil},
		{"IgnoredContext", faults{ignoreCtx: true}, "wraps ctx.Err()",
			[]string{"Context/Cancelled", "Context/DeadlineExceeded", "Batch/Context", "SetNXValue/Context"}, nil},
		{"BatchLastWins", faults{batchLastWins: true}, "claimed by its first occurrence", []string{"Batch/DuplicateKeys"}, nil},
		{"BatchPartial", faults{batchPartial: true}, "nothing is written", []string{"Batch/Invalid"}, nil},
		{"BatchUnordered", faults{batchUnordered: true}, "results in input order",
			[]string{"Batch/MixedNewHeldExpired", "Batch/Isolation"}, nil},
		{"ValueNoExpiry", faults{valueNoExpiry: true}, "expired entry is absent", []string{"SetNXValue/Expiry"}, nil},
		{"ValueNoExpiryTTL", faults{valueNoExpiry: true}, "SetNXValue is SetNX without the existing entry's TTL",
			[]string{"SetNXValue/AbsentThenPresent"}, nil},
		{"ValueHidden", faults{valueHidden: true}, "SetNXValue is SetNX without the existing entry's TTL",
			[]string{"SetNXValue/AbsentThenPresent", "SetNXValue/EmptyValue", "Race/SetNXValueOneWinner"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.f.getThenSet {
				// Only the races of GetThenSet need the processors to
				// themselves; the other breaks show whatever the load.
				t.Parallel()
			}
			found := violations(t, tt.f)
			by := map[string]bool{}
			for _, v := range found {
				if !strings.Contains(v.Error(), `contract: "`+v.Rule+`"`) {
					t.Errorf("violation does not quote its rule: %v", v)
				}
				if strings.Contains(v.Rule, tt.rule) {
					by[v.Case] = true
				}
			}
			for _, c := range tt.cases {
				if !by[c] {
					t.Errorf("case %s reported no violation of the rule %q", c, tt.rule)
				}
			}
			for _, group := range tt.anyOf {
				if !slices.ContainsFunc(group, func(c string) bool { return by[c] }) {
					t.Errorf("none of the cases %v reported a violation of the rule %q", group, tt.rule)
				}
			}
			if t.Failed() {
				t.Logf("Check found:\n%v", errors.Join(unjoin(errorsOf(found))...))
			}
		})
	}
}

func errorsOf(vs []*storetest.Violation) error {
	errs := make([]error, len(vs))
	for i, v := range vs {
		errs[i] = v
	}
	return errors.Join(errs...)
}

// plainStore hides every method but those of store.Store.
type plainStore struct{ store.Store }

func TestCheckSkipsOptionalCasesWithoutTheirInterfaces(t *testing.T) {
	f := faults{batchLastWins: true, batchPartial: true, batchUnordered: true, valueNoExpiry: true, valueHidden: true}
	newStore := func() (store.Store, error) { return plainStore{newRefStore(f)}, nil }
	if err := storetest.Check(t.Context(), newStore); err != nil {
		t.Errorf("Check of a store without SetNXBatch or SetNXValue ran their cases:\n%v", err)
	}
}

func TestCheckStopsWhenNewStoreFails(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	err := storetest.Check(t.Context(), func() (store.Store, error) { calls++; return nil, boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Errorf("Check = %v after %d calls of newStore, want an error wrapping boom after 1", err, calls)
	}
}

func TestCheckStopsWhenContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := 0
	err := storetest.Check(ctx, func() (store.Store, error) { calls++; return newRefStore(faults{}), nil })
	if !errors.Is(err, context.Canceled) || calls != 0 {
		t.Errorf("Check = %v after %d calls of newStore, want context.Canceled after none", err, calls)
	}
}
