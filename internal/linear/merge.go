package linear

import (
	"encoding/json"
	"fmt"

	"github.com/anishathalye/porcupine"
)

// record is one operation as MarshalOps writes it.
type record[I, O any] struct {
	Client       int
	Call, Return int64
	In           I
	Out          O
}

// MarshalOps encodes ops, whose inputs are I and outputs O (Input and
// Output, or ClaimInput and ClaimOutput), as JSON: a process recording
// part of a history hands it to the one that checks it.
func MarshalOps[I, O any](ops []porcupine.Operation) ([]byte, error) {
	recs := make([]record[I, O], len(ops))
	for i, op := range ops {
		in, ok := op.Input.(I)
		out, ok2 := op.Output.(O)
		if !ok || !ok2 {
			return nil, fmt.Errorf("linear: operation %d is %T → %T, not the types asked for", i, op.Input, op.Output)
		}
		recs[i] = record[I, O]{Client: op.ClientId, Call: op.Call, Return: op.Return, In: in, Out: out}
	}
	return json.Marshal(recs)
}

// UnmarshalOps decodes operations MarshalOps encoded.
func UnmarshalOps[I, O any](data []byte) ([]porcupine.Operation, error) {
	var recs []record[I, O]
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("linear: decoding operations: %w", err)
	}
	ops := make([]porcupine.Operation, len(recs))
	for i, r := range recs {
		ops[i] = porcupine.Operation{ClientId: r.Client, Call: r.Call, Return: r.Return, Input: r.In, Output: r.Out}
	}
	return ops, nil
}

// Merge joins the parts of one history that separate processes recorded
// with one Origin (Workload.Origin, EngineWorkload.Origin): each part's
// client ids are moved past the previous parts', and every operation with
// an unknown outcome is answered at the end of the merged history (each
// part answered it at the end of its own), so that it may take effect at
// any instant after its call, or never.
func Merge(parts ...[]porcupine.Operation) []porcupine.Operation {
	var ops []porcupine.Operation
	var end int64
	base := 0
	for _, part := range parts {
		top := 0
		for _, op := range part {
			top = max(top, op.ClientId+1)
			op.ClientId += base
			end = max(end, op.Call, op.Return)
			ops = append(ops, op)
		}
		base += top
	}
	for i := range ops {
		if unknownOutcome(ops[i]) {
			ops[i].Return = end + 1
		}
	}
	return ops
}

// unknownOutcome reports whether op's outcome is unknown, in either model.
func unknownOutcome(op porcupine.Operation) bool {
	switch out := op.Output.(type) {
	case Output:
		return out.Unknown
	case ClaimOutput:
		return unknownEnd(op)
	}
	return false
}
