// Package layout reads the engine's storage layout, the names of its
// store keys and the header of its records, for the packages below the
// engine that keep per-scope or per-state bookkeeping (memstore), which
// must not import the engine. The engine's keys.go and record.go write
// what it reads (idemkit.ScopeOf calls ScopeOf, and record.go takes its
// version, in-progress state and header length from here); memstore's
// TestLayoutMatchesTheEngine checks both against the engine's own writes.
package layout

import "strings"

// ScopeOf returns the scope segment of a store key the engine wrote,
// <namespace>:<space>:<scope>:<key> with a one-character space: the same
// text for every key of one scope, and "-" for keys written without a
// scope. It returns "" for a key the engine did not write.
func ScopeOf(storeKey string) string {
	_, rest, ok := strings.Cut(storeKey, ":")
	if !ok {
		return ""
	}
	space, rest, ok := strings.Cut(rest, ":")
	if !ok || len(space) != 1 {
		return ""
	}
	scope, _, ok := strings.Cut(rest, ":")
	if !ok || scope == "" {
		return ""
	}
	return scope
}

// The record header the engine writes (record.go takes these values): a
// version byte, a state byte, then 56 bytes of owner, times, fencing
// token, lease tail and lineage; a claim holds at least one byte of
// fingerprint length after it.
const (
	RecordVersion   = 2
	StateInProgress = 2
	RecordHeaderLen = 58
	minClaimLen     = RecordHeaderLen + 1
)

// InProgress reports whether value is an engine record of a claim in
// progress: work that is running under a lease, whose loss would let a
// duplicate run it again.
func InProgress(value []byte) bool {
	return len(value) >= minClaimLen && value[0] == RecordVersion && value[1] == StateInProgress
}
