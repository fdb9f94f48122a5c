package idemkit

import "bytes"

// Settled reports whether a value the engine stored can no longer change
// before it expires: a completed result (success, final error, or the
// terminal record of a result too large to keep) or a Guard
// claim kept until its window ends. An in-progress record, an unused token
// or a releasable claim is not settled. Caches in front of a store (see
// policy.NearCache) may keep settled values until their TTL runs out.
func Settled(value []byte) bool {
	if isGuardClaim(value) {
		return value[0] == guardKept
	}
	r, err := decodeRecord(value)
	return err == nil && (r.state == stateDone || r.state == stateFailed || r.state == stateTooLarge)
}

// Supersedes reports whether candidate, a value the engine wrote, is a
// later state of the claim that held records: the same owner's in-progress
// record completed (with a result or a terminal record), failed or spent,
// or an unused token that was used
// since. A store that copies values forward after an outage (see
// policy.Tiered) replaces held with candidate when it does, and keeps held
// otherwise: it never drops a finished result for its own orphaned claim,
// and never lets another owner's claim through.
func Supersedes(held, candidate []byte) bool {
	if bytes.Equal(held, issuedToken) {
		c, err := decodeRecord(candidate)
		return err == nil && c.state != stateIssued
	}
	h, err := decodeRecord(held)
	if err != nil || h.state != stateInProgress {
		return false
	}
	c, err := decodeRecord(candidate)
	if err != nil || c.owner != h.owner {
		return false
	}
	return c.state == stateDone || c.state == stateFailed || c.state == stateSpent || c.state == stateTooLarge
}
