package setup_test

import (
	"context"
	"fmt"
	"log"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/setup"
)

// The environment chooses the store; the program chooses its default.
func Example() {
	environ := []string{"IDEMKIT_STORE=mem://?capacity=10000", "IDEMKIT_NEAR_CACHE=1000"} // os.Environ()
	cfg, err := setup.FromEnv(environ)
	if err != nil {
		log.Fatal(err)
	}
	if cfg.Store == "" {
		cfg.Store = "bolt://app-idem.db"
	}
	st, err := setup.Build(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	fmt.Println(st)

	e, err := st.NewEngine(idemkit.WithObserver(nil))
	if err != nil {
		log.Fatal(err)
	}
	res, err := e.Do(context.Background(), "order-42", "fp", func(context.Context) ([]byte, error) {
		return []byte("created"), nil
	})
	fmt.Println(string(res.Value), err)
	// Output:
	// mem://?capacity=10000, near cache of 1000 keys, on store error: closed
	// created <nil>
}

// Misspelt variables and values are refused by name.
func ExampleFromEnv_refused() {
	_, err := setup.FromEnv([]string{"IDEMKIT_ON_STORE_ERROR=fail-open"})
	fmt.Println(err)
	_, err = setup.FromEnv([]string{"IDEMKIT_BUDGE=100ms"})
	fmt.Println(err)
	// Output:
	// IDEMKIT_ON_STORE_ERROR: setup: invalid configuration: failure mode "fail-open": want closed or open
	// setup: invalid configuration: unknown variable IDEMKIT_BUDGE (known: IDEMKIT_STORE, IDEMKIT_FALLBACK, IDEMKIT_ON_STORE_ERROR, IDEMKIT_BUDGET, IDEMKIT_NEAR_CACHE, IDEMKIT_KEY_SECRET, IDEMKIT_KEY_SECRET_FILE)
}
