package idemkit

// StoreKey exposes, to the external tests, the store key the engine uses
// for key in mode (ModeGuard, ModeDo, ModeToken) and scope.
func StoreKey(e *Engine, mode Mode, scope, key string) string {
	space := map[Mode]int{ModeGuard: spaceGuard, ModeDo: spaceDo, ModeToken: spaceToken}[mode]
	return e.composeKey(&e.cfg, space, scope, key)
}
