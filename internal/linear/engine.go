package linear

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// ClaimKind names an observation of the engine's claim of one key.
type ClaimKind uint8

// The observations EngineModel knows; see the package documentation,
// "The engine model".
const (
	// Admit is a Begin that admitted a claim with token ClaimInput.Fence.
	Admit ClaimKind = iota
	// Replay is a Begin that found the key's recorded result.
	Replay
	// Busy is a Begin that returned ErrInProgress.
	Busy
	// BeginFailed is a Begin whose outcome is unknown (the store failed
	// or did not answer): it may have claimed the key with a token nobody
	// learnt, superseding the claim that held it.
	BeginFailed
	// Complete is a Complete of the claim with token ClaimInput.Fence.
	Complete
)

func (k ClaimKind) String() string {
	switch k {
	case Admit:
		return "Admit"
	case Replay:
		return "Replay"
	case Busy:
		return "Busy"
	case BeginFailed:
		return "BeginFailed"
	case Complete:
		return "Complete"
	}
	return fmt.Sprintf("ClaimKind(%d)", uint8(k))
}

// ClaimInput is one observation's call: its kind, the key, and the
// claim's token (Admit, Complete).
type ClaimInput struct {
	Kind  ClaimKind
	Key   string
	Fence uint64
}

// ClaimOutput is a Complete's outcome: recorded (OK), refused with
// ErrLeaseLost (Lost), or unknown (the store failed or did not answer).
// The Begin observations carry their outcome in their kind.
type ClaimOutput struct {
	OK, Lost, Unknown bool
}

// claimState is one key's state in EngineModel: the highest token
// admitted (0: none yet), whether the claim with that token still holds
// the key (no unknown Begin may have superseded it, and it was not
// completed), and whether a result is recorded.
type claimState struct {
	highest uint64
	held    bool
	done    bool
}

// claimStep is the sequential specification of the engine's claim of one
// key.
func claimStep(st claimState, in ClaimInput, out ClaimOutput) (bool, claimState) {
	switch in.Kind {
	case Admit:
		return !st.done && in.Fence > st.highest, claimState{highest: in.Fence, held: true}
	case Replay:
		return st.done, st
	case Busy:
		return !st.done, st
	case BeginFailed:
		st.held = false
		return true, st
	case Complete:
		owner := st.held && st.highest == in.Fence && !st.done
		switch {
		case out.Unknown:
			if owner {
				return true, claimState{highest: st.highest, done: true}
			}
			return true, st
		case out.OK:
			return owner, claimState{highest: st.highest, done: true}
		case out.Lost:
			return !owner, st
		}
	}
	return false, st
}

// EngineModel is the porcupine model of the engine's claim of a key
// (Begin, then Complete) as at most one owner at a time with increasing
// fencing tokens, partitioned by key; see the package documentation.
var EngineModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		return partitionBy(history, func(in any) string { return in.(ClaimInput).Key })
	},
	Init: func() any { return claimState{} },
	Step: func(s, in, out any) (bool, any) {
		return claimStep(s.(claimState), in.(ClaimInput), out.(ClaimOutput))
	},
	Equal: func(a, b any) bool { return a.(claimState) == b.(claimState) },
	Hash: func(s any) uint64 {
		st := s.(claimState)
		h := fnv.New64a()
		fmt.Fprint(h, st.highest, st.held, st.done)
		return h.Sum64()
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(ClaimInput), out.(ClaimOutput)
		switch i.Kind {
		case Admit:
			return fmt.Sprintf("Begin(%s) → admitted %d", i.Key, i.Fence)
		case Replay:
			return fmt.Sprintf("Begin(%s) → replayed", i.Key)
		case Busy:
			return fmt.Sprintf("Begin(%s) → in progress", i.Key)
		case BeginFailed:
			return fmt.Sprintf("Begin(%s) → unknown", i.Key)
		}
		res := "ok"
		switch {
		case o.Unknown:
			res = "unknown"
		case o.Lost:
			res = "lease lost"
		}
		return fmt.Sprintf("Complete(%s, %d) → %s", i.Key, i.Fence, res)
	},
	DescribeState: func(s any) string {
		st := s.(claimState)
		return fmt.Sprintf("highest %d, held %v, done %v", st.highest, st.held, st.done)
	},
}

// partitionBy splits a history by the key that key returns for an input.
func partitionBy(history []porcupine.Operation, key func(any) string) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		k := key(op.Input)
		i, ok := index[k]
		if !ok {
			i = len(parts)
			index[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}
