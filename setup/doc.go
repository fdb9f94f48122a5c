// Package setup builds the store an idemkit engine runs on, and the
// policies around it, from one configuration: a set of URLs and settings,
// usually read from environment variables, so that each environment
// chooses its store without a code change (memory in unit tests, a bbolt
// file on a laptop or an edge box, Redis in production).
//
//	cfg, err := setup.FromEnv(os.Environ())   // IDEMKIT_STORE=redis://...
//	if cfg.Store == "" {
//		cfg.Store = "bolt://app-idem.db"       // the program's default
//	}
//	st, err := setup.Build(ctx, cfg)
//	defer st.Close()
//	engine, err := st.NewEngine(idemkit.WithNamespace("shop"))
//
// # What Build assembles
//
// From the inside out: the store opened from Config.Store by store.Open;
// a per-call time budget around it (budget.New), by default for stores
// reached over the network only; a fallback store from Config.Fallback,
// answering while the first one fails (tiered.New); a near cache of
// settled results (nearcache.New) when Config.NearCache is positive.
// The engine options it returns carry the failure mode
// (idemkit.WithFailureMode).
//
// # Schemes
//
// store.Open knows the schemes of the backends the program imports: a
// blank import brings one in, so a program pays only for the backends it
// can use. Package setup itself brings in mem:// (store/memstore, standard
// library only); import store/boltstore for bolt://, store/redisstore
// for redis://, rediss://, redis+sentinel:// and redis+cluster://, and
// store/sqlstore with a database/sql driver for postgres:// and mysql://.
//
// # Environment variables
//
//	IDEMKIT_STORE           store URL, e.g. redis://:pw@cache:6379/0?prefix=shop:
//	IDEMKIT_FALLBACK        store URL of the fallback, e.g. mem://?capacity=100000 (default none)
//	IDEMKIT_ON_STORE_ERROR  closed (answer unavailable, the default) or open (run unguarded)
//	IDEMKIT_BUDGET          per-call time budget of the store, e.g. 500ms, or off
//	                        (default budget.Default, 1s, for network stores; off for mem:// and bolt://)
//	IDEMKIT_NEAR_CACHE      near-cache capacity in keys, or off (the default)
//	IDEMKIT_KEY_SECRET      key secret (idemkit.WithKeySecret), used as it is, at least 32 bytes
//	IDEMKIT_KEY_SECRET_FILE file holding the key secret instead (one trailing newline removed)
//
// FromEnv refuses a variable it does not know that starts with IDEMKIT_,
// and a value it cannot use, with an error that names the variable and
// never quotes a URL's password.
package setup
