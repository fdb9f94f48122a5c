package linear

import (
	"slices"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestIllegalKeys checks that IllegalKeys names the keys whose own
// history is not linearizable, in either model, and that Describe lists
// a key's operations by call time, relative to the origin given.
func TestIllegalKeys(t *testing.T) {
	ops := []porcupine.Operation{
		op(0, 30, 40, Input{Kind: SetNX, Key: "bad", Value: "b"}, Output{OK: true}),
		op(1, 10, 20, Input{Kind: SetNX, Key: "bad", Value: "a"}, Output{OK: true}),
		op(0, 10, 20, Input{Kind: SetNX, Key: "good", Value: "a"}, Output{OK: true}),
		op(1, 30, 40, Input{Kind: Get, Key: "good"}, Output{OK: true, Value: "a"}),
	}
	if got := IllegalKeys(Model, ops); !slices.Equal(got, []string{"bad"}) {
		t.Errorf("IllegalKeys = %v, want [bad]", got)
	}
	d := Describe(Model, ops, "bad", 10)
	lines := strings.Split(strings.TrimSpace(d), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `SetNX(bad, "a") → set`) || !strings.Contains(lines[0], "+0.0ms") {
		t.Errorf("Describe:\n%s\nwant SetNX(bad, a) first, at +0.0ms", d)
	}
	claims := []porcupine.Operation{
		{ClientId: 0, Call: 0, Return: 1, Input: ClaimInput{Kind: Admit, Key: "k", Fence: 2}, Output: ClaimOutput{}},
		{ClientId: 1, Call: 2, Return: 3, Input: ClaimInput{Kind: Admit, Key: "k", Fence: 1}, Output: ClaimOutput{}},
		{ClientId: 0, Call: 0, Return: 1, Input: ClaimInput{Kind: Admit, Key: "j", Fence: 1}, Output: ClaimOutput{}},
	}
	if got := IllegalKeys(EngineModel, claims); !slices.Equal(got, []string{"k"}) {
		t.Errorf("IllegalKeys of claims = %v, want [k] (a token going back)", got)
	}
}
