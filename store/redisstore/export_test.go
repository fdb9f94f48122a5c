package redisstore

// UseScripts makes s run every operation as it does on Redis 6.2 (Lua
// scripts), whatever its server offers, so that tests cover that path on
// a newer server.
func UseScripts(s *Store) { s.dial.Store(&dialect{}) }

// UseNative makes s use plain commands: SET ... NX GET for SetNX and
// Get, and, with ifEq, SET/DELEX ... IFEQ for CompareAndSwap and
// CompareAndDelete, without asking the server.
func UseNative(s *Store, ifEq bool) { s.dial.Store(&dialect{setGetNX: true, ifEq: ifEq}) }

// Dialect reports what s detected: SET ... NX GET, and SET/DELEX ...
// IFEQ. detected is false before the first operation.
func Dialect(s *Store) (setGetNX, ifEq, detected bool) {
	d := s.dial.Load()
	if d == nil {
		return false, false, false
	}
	return d.setGetNX, d.ifEq, true
}
