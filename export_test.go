package idemkit

// StoreKey exposes, to the external tests, the store key the engine uses
// for key in mode (ModeGuard, ModeDo, ModeToken) and scope.
func StoreKey(e *Engine, mode Mode, scope, key string) string {
	space := map[Mode]int{ModeGuard: spaceGuard, ModeDo: spaceDo, ModeToken: spaceToken}[mode]
	return e.composeKey(&e.cfg, space, scope, key)
}

// IsBeat reports whether a CompareAndSwap of old for nw is a heartbeat:
// both are in-progress records of one claim (the same owner nonce).
func IsBeat(old, nw []byte) bool {
	a, err1 := decodeRecord(old)
	b, err2 := decodeRecord(nw)
	return err1 == nil && err2 == nil && a.state == stateInProgress && b.state == stateInProgress && a.owner == b.owner
}

// FenceOf returns the fencing token of the record value b, or 0 when b is
// not a record.
func FenceOf(b []byte) uint64 {
	r, err := decodeRecord(b)
	if err != nil {
		return 0
	}
	return r.fence
}
