package sqlstore_test

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// TestConformance runs the store contract's suite on each database, on
// the Store's own pool and on a View (the locking statement order Views
// use), and on MySQL without DELETE ... RETURNING too.
func TestConformance(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, b) })
		})
		t.Run(b.name+"/View", func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, b).Tx(b.db) })
		})
	}
	t.Run("mysql/NoReturning", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, my, sqlstore.WithoutReturning()) })
	})
	t.Run("mysql/View/NoReturning", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, my, sqlstore.WithoutReturning()).Tx(my.db) })
	})
}
