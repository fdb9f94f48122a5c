package linear

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

func claimOp(client int, call, ret int64, in ClaimInput, out ClaimOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

// TestEngineModel checks EngineModel on small histories of one key,
// linearizable or not, with and without unknown outcomes.
func TestEngineModel(t *testing.T) {
	admit := func(f uint64) ClaimInput { return ClaimInput{Kind: Admit, Key: "k", Fence: f} }
	complete := func(f uint64) ClaimInput { return ClaimInput{Kind: Complete, Key: "k", Fence: f} }
	replay := ClaimInput{Kind: Replay, Key: "k"}
	busy := ClaimInput{Kind: Busy, Key: "k"}
	failed := ClaimInput{Kind: BeginFailed, Key: "k"}
	ok, lost, unknown, none := ClaimOutput{OK: true}, ClaimOutput{Lost: true}, ClaimOutput{Unknown: true}, ClaimOutput{}
	const end = 1000
	cases := []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"claim, complete, replay", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(0, 2, 3, complete(5), ok), claimOp(1, 4, 5, replay, none)}, true},
		{"replay before any completion", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(1, 2, 3, replay, none)}, false},
		{"in progress after completion", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(0, 2, 3, complete(5), ok), claimOp(1, 4, 5, busy, none)}, false},
		{"claim after completion", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(0, 2, 3, complete(5), ok), claimOp(1, 4, 5, admit(6), none)}, false},
		{"takeover, stale completion lost", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(1, 2, 3, admit(6), none), claimOp(0, 4, 5, complete(5), lost), claimOp(1, 6, 7, complete(6), ok)}, true},
		{"stale completion after a takeover", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(1, 2, 3, admit(6), none), claimOp(0, 4, 5, complete(5), ok)}, false},
		{"completion concurrent with a takeover", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(1, 2, 6, admit(6), none), claimOp(0, 4, 5, complete(5), ok)}, false},
		{"lease lost concurrently with a takeover", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(1, 2, 6, admit(6), none), claimOp(0, 4, 5, complete(5), lost)}, true},
		{"lease lost before the takeover", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(0, 2, 3, complete(5), lost), claimOp(1, 4, 5, admit(6), none)}, false},
		{"two completions", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(1, 2, 3, admit(6), none), claimOp(1, 4, 5, complete(6), ok), claimOp(0, 6, 7, complete(5), ok)}, false},
		{"token not larger", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(1, 2, 3, admit(5), none)}, false},
		{"token going back", []porcupine.Operation{claimOp(0, 0, 1, admit(6), none), claimOp(1, 2, 3, admit(5), none)}, false},
		{"concurrent claims in either order", []porcupine.Operation{claimOp(0, 0, 3, admit(6), none), claimOp(1, 1, 2, admit(5), none)}, true},
		{"lease lost while it held the key", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(0, 2, 3, complete(5), lost)}, false},
		{"lease lost to an unknown Begin", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(1, 2, end, failed, none), claimOp(0, 4, 5, complete(5), lost)}, true},
		{"unknown completion that happened", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(0, 2, end, complete(5), unknown), claimOp(1, 4, 5, replay, none)}, true},
		{"unknown completion that did not", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(0, 2, end, complete(5), unknown), claimOp(1, 4, 5, admit(6), none), claimOp(1, 6, 7, complete(6), ok)}, true},
		{"unknown stale completion", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(1, 2, 3, admit(6), none), claimOp(0, 4, end, complete(5), unknown), claimOp(1, 6, 7, complete(6), ok)}, true},
		{"keys apart", []porcupine.Operation{claimOp(0, 0, 1, admit(5), none), claimOp(1, 2, 3, ClaimInput{Kind: Admit, Key: "j", Fence: 1}, none)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := porcupine.CheckOperations(EngineModel, c.ops)
			if got != c.ok {
				t.Errorf("linearizable = %v, want %v", got, c.ok)
			}
		})
	}
}
