package idemrelay

// WithAfterPublish makes the relay call fn between the broker's confirms
// and the removal of the batch's rows, with the ids confirmed: the point
// where a crash leaves published rows in the outbox.
func WithAfterPublish(fn func(confirmed []string)) Option {
	return func(c *config) error {
		c.afterPublish = fn
		return nil
	}
}

// Backoff exposes the back-off schedule.
var Backoff = backoff
