package sqlstore

// WithoutReturning makes a MySQL-dialect Store consume without
// DELETE ... RETURNING, as it does on MySQL, so that tests on MariaDB
// cover that path too.
func WithoutReturning() Option {
	return func(c *config) error {
		c.returning = featureNo
		return nil
	}
}
