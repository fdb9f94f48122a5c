package idemkit

import "fmt"

// CheckOptions reports, as an error wrapping ErrInvalid, the first option
// that a call given opts would reject.
//
// Deprecated: build a per-route view with (*Engine).With instead, which
// validates once and keeps the result. CheckOptions is removed before v1.
func CheckOptions(opts ...Option) error {
	base := defaultConfig()
	cfg := base
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err == nil && (cfg.namespace != base.namespace || cfg.readable) {
		cfg.invalid("the namespace and readable keys are set per engine, not per call")
	}
	if cfg.err != nil {
		return fmt.Errorf("idemkit: %w", cfg.err)
	}
	return nil
}
