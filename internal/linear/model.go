package linear

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// Kind names an operation of the store.Store contract.
type Kind uint8

// The operations the model knows. A SetNXBatch item is a SetNX (with
// Input.Batch set, for the visualization): each item of a batch is atomic
// on its own key, which is all store.Batcher promises.
const (
	SetNX Kind = iota
	Get
	CompareAndSwap
	CompareAndDelete
	Consume
)

func (k Kind) String() string {
	switch k {
	case SetNX:
		return "SetNX"
	case Get:
		return "Get"
	case CompareAndSwap:
		return "CAS"
	case CompareAndDelete:
		return "CAD"
	case Consume:
		return "Consume"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Input is one operation's call: its kind, key and arguments. Value is
// SetNX's value and CompareAndSwap's new value; Old is the compared value
// of CompareAndSwap and CompareAndDelete.
type Input struct {
	Kind  Kind
	Key   string
	Value string
	Old   string
	Batch bool // a SetNX that was one item of a SetNXBatch
}

// Output is one operation's response. OK is SetNX's set, Get's and
// Consume's found, and the compare operations' result; Value is the value
// SetNX found (when not set), Get read, or Consume took. Unknown marks an
// operation whose outcome the client never learnt (a timeout, a lost
// connection, store.ErrUnavailable): it may have taken effect at any
// instant after its call, or never.
type Output struct {
	OK      bool
	Value   string
	Unknown bool
}

// state is one key's state: absent, or present with a value. Expiry is
// not modelled (see the package documentation).
type state struct {
	present bool
	value   string
}

// step is the sequential specification of one operation on one key: it
// reports whether the store may answer in with out from st, and the state
// after.
func step(st state, in Input, out Output) (bool, state) {
	switch in.Kind {
	case SetNX:
		if !st.present {
			return out.Unknown || out.OK, state{true, in.Value}
		}
		return out.Unknown || (!out.OK && out.Value == st.value), st
	case Get:
		if out.Unknown {
			return true, st
		}
		if !st.present {
			return !out.OK, st
		}
		return out.OK && out.Value == st.value, st
	case CompareAndSwap:
		match := st.present && st.value == in.Old
		next := st
		if match {
			next = state{true, in.Value}
		}
		return out.Unknown || out.OK == match, next
	case CompareAndDelete:
		match := st.present && st.value == in.Old
		next := st
		if match {
			next = state{}
		}
		return out.Unknown || out.OK == match, next
	case Consume:
		if !st.present {
			return out.Unknown || !out.OK, st
		}
		return out.Unknown || (out.OK && out.Value == st.value), state{}
	}
	return false, st
}

// Model is the porcupine model of the store.Store contract, partitioned
// by key: a history is linearizable if and only if every key's history
// is, since every operation (every batch item) touches one key.
var Model = porcupine.Model{
	Partition: partition,
	Init:      func() any { return state{} },
	Step: func(s, in, out any) (bool, any) {
		return step(s.(state), in.(Input), out.(Output))
	},
	Equal: func(a, b any) bool { return a.(state) == b.(state) },
	Hash: func(s any) uint64 {
		st := s.(state)
		if !st.present {
			return 0
		}
		h := fnv.New64a()
		h.Write([]byte(st.value))
		return h.Sum64() | 1
	},
	DescribeOperation: describeOperation,
	DescribeState: func(s any) string {
		st := s.(state)
		if !st.present {
			return "absent"
		}
		return fmt.Sprintf("%q", st.value)
	},
}

// partition splits a history by key.
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	return partitionBy(history, func(in any) string { return in.(Input).Key })
}

func describeOperation(in, out any) string {
	i, o := in.(Input), out.(Output)
	var call string
	switch i.Kind {
	case SetNX:
		call = fmt.Sprintf("SetNX(%s, %q)", i.Key, i.Value)
		if i.Batch {
			call = "Batch" + call
		}
	case Get, Consume:
		call = fmt.Sprintf("%v(%s)", i.Kind, i.Key)
	case CompareAndSwap:
		call = fmt.Sprintf("CAS(%s, %q→%q)", i.Key, i.Old, i.Value)
	case CompareAndDelete:
		call = fmt.Sprintf("CAD(%s, %q)", i.Key, i.Old)
	}
	var res string
	switch {
	case o.Unknown:
		res = "unknown"
	case i.Kind == SetNX && o.OK:
		res = "set"
	case i.Kind == SetNX:
		res = fmt.Sprintf("exists %q", o.Value)
	case (i.Kind == Get || i.Kind == Consume) && o.OK:
		res = fmt.Sprintf("%q", o.Value)
	case i.Kind == Get || i.Kind == Consume:
		res = "not found"
	default:
		res = fmt.Sprint(o.OK)
	}
	return call + " → " + res
}
