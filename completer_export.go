package idemkit

// Namespace returns the namespace the engine's store keys start with
// (WithNamespace; DefaultNamespace without it), for tools that list the
// engine's keys with a store.Scanner, such as the completer package.
func (e *Engine) Namespace() string { return e.cfg.namespace }
