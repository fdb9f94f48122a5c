package sqlstore

// WithoutReturning makes a MySQL-dialect Store claim and consume without
// INSERT and DELETE ... RETURNING, as it does on MySQL, so that tests on
// MariaDB cover that path too.
func WithoutReturning() Option {
	return func(c *config) error {
		c.returning = featureNo
		return nil
	}
}

// WrapOwnConn replaces the Conn of the Store's own operations with
// wrap's result, so that tests see the statements they run.
func WrapOwnConn(s *Store, wrap func(Conn) Conn) {
	s.view.c = wrap(s.view.c)
}
