package linear

import (
	"reflect"
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestMergeParts checks that parts recorded by separate processes, sent
// through MarshalOps, merge into one history: distinct clients, unknown
// outcomes answered after every operation of every part, and the merged
// history checked as one (a claim won in each part is a claim won twice).
func TestMergeParts(t *testing.T) {
	a := []porcupine.Operation{
		op(0, 10, 20, Input{Kind: SetNX, Key: "k", Value: "a"}, Output{OK: true}),
		op(1, 15, 30, Input{Kind: Consume, Key: "j"}, Output{Unknown: true}),
	}
	b := []porcupine.Operation{
		op(0, 40, 50, Input{Kind: SetNX, Key: "k", Value: "b"}, Output{OK: true}),
		op(0, 60, 70, Input{Kind: Get, Key: "j"}, Output{}),
	}
	var parts [][]porcupine.Operation
	for _, p := range [][]porcupine.Operation{a, b} {
		data, err := MarshalOps[Input, Output](p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalOps[Input, Output](data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip: got %v, want %v", got, p)
		}
		parts = append(parts, got)
	}
	ops := Merge(parts...)
	var ids []int
	for _, o := range ops {
		ids = append(ids, o.ClientId)
	}
	if want := []int{0, 1, 2, 2}; !reflect.DeepEqual(ids, want) {
		t.Errorf("client ids %v, want %v", ids, want)
	}
	if ops[1].Return != 71 {
		t.Errorf("the unknown outcome returns at %d, want 71 (after every part)", ops[1].Return)
	}
	if porcupine.CheckOperations(Model, ops) {
		t.Errorf("two SetNX set the same key, one in each part: want the merged history illegal")
	}
	if !porcupine.CheckOperations(Model, Merge(parts[0], parts[1][1:])) {
		t.Errorf("want the history without the second claim linearizable")
	}
	if _, err := MarshalOps[ClaimInput, ClaimOutput](a); err == nil {
		t.Errorf("MarshalOps of store operations as claims: want an error")
	}
	if _, err := UnmarshalOps[Input, Output]([]byte("{")); err == nil {
		t.Errorf("UnmarshalOps of bad JSON: want an error")
	}
}
