package linear

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

// TestModel checks the model on small histories, linearizable or not,
// with and without unknown outcomes.
func TestModel(t *testing.T) {
	setA := Input{Kind: SetNX, Key: "k", Value: "a"}
	setB := Input{Kind: SetNX, Key: "k", Value: "b"}
	get := Input{Kind: Get, Key: "k"}
	consume := Input{Kind: Consume, Key: "k"}
	casAB := Input{Kind: CompareAndSwap, Key: "k", Old: "a", Value: "b"}
	cadA := Input{Kind: CompareAndDelete, Key: "k", Old: "a"}
	set, unknown := Output{OK: true}, Output{Unknown: true}
	found := func(v string) Output { return Output{OK: true, Value: v} }
	exists := func(v string) Output { return Output{Value: v} }
	const end = 1000
	cases := []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"two concurrent SetNX, one wins", []porcupine.Operation{op(0, 0, 10, setA, set), op(1, 1, 9, setB, exists("a"))}, true},
		{"two SetNX both win", []porcupine.Operation{op(0, 0, 10, setA, set), op(1, 1, 9, setB, set)}, false},
		{"SetNX sees a value never written", []porcupine.Operation{op(0, 0, 10, setA, exists("b"))}, false},
		{"read of an absent key", []porcupine.Operation{op(0, 0, 1, get, Output{})}, true},
		{"stale read after CAS", []porcupine.Operation{op(0, 0, 1, setA, set), op(0, 2, 3, casAB, Output{OK: true}), op(1, 4, 5, get, found("a"))}, false},
		{"CAS then read", []porcupine.Operation{op(0, 0, 1, setA, set), op(0, 2, 3, casAB, Output{OK: true}), op(1, 4, 5, get, found("b"))}, true},
		{"CAS on a replaced value", []porcupine.Operation{op(0, 0, 1, setA, set), op(0, 2, 3, casAB, Output{OK: true}), op(1, 4, 5, casAB, Output{OK: true})}, false},
		{"consume twice", []porcupine.Operation{op(0, 0, 1, setA, set), op(0, 2, 3, consume, found("a")), op(1, 4, 5, consume, found("a"))}, false},
		{"CAD then absent", []porcupine.Operation{op(0, 0, 1, setA, set), op(0, 2, 3, cadA, Output{OK: true}), op(1, 4, 5, get, Output{})}, true},
		{"unknown SetNX that happened", []porcupine.Operation{op(0, 0, end, setA, unknown), op(1, 5, 6, get, found("a"))}, true},
		{"unknown SetNX that did not", []porcupine.Operation{op(0, 0, end, setA, unknown), op(1, 5, 6, get, Output{}), op(1, 7, 8, setB, set)}, true},
		{"unknown SetNX cannot happen before its call", []porcupine.Operation{op(1, 0, 1, get, found("a")), op(0, 5, end, setA, unknown)}, false},
		{"unknown consume", []porcupine.Operation{op(0, 0, 1, setA, set), op(1, 2, end, consume, unknown), op(0, 3, 4, get, Output{}), op(0, 5, 6, get, Output{})}, true},
		{"unknown consume happens once", []porcupine.Operation{op(0, 0, 1, setA, set), op(1, 2, end, consume, unknown), op(0, 3, 4, get, Output{}), op(0, 5, 6, get, found("a"))}, false},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(Model, c.ops); got != c.ok {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.ok)
		}
	}
}

// TestModelPartitionsByKey: operations on different keys never constrain
// each other.
func TestModelPartitionsByKey(t *testing.T) {
	ops := []porcupine.Operation{
		op(0, 0, 1, Input{Kind: SetNX, Key: "x", Value: "a"}, Output{OK: true}),
		op(0, 2, 3, Input{Kind: SetNX, Key: "y", Value: "a"}, Output{OK: true}),
		op(1, 4, 5, Input{Kind: Get, Key: "x"}, Output{OK: true, Value: "a"}),
	}
	if len(partition(ops)) != 2 {
		t.Fatalf("%d partitions, want 2", len(partition(ops)))
	}
	if !porcupine.CheckOperations(Model, ops) {
		t.Fatal("not linearizable")
	}
}
