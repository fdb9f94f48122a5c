// Command idemdemo is a small order service that shows idemkit's three ways
// of stopping duplicate submissions, wired into a real net/http server over
// a durable store, and a load tool that fires duplicate storms at it.
//
//	go run ./cmd/idemdemo                 # serve on 127.0.0.1:8080, bbolt file ./idemdemo.db
//	go run ./cmd/idemdemo -store redis://localhost:6379/0
//	go run ./cmd/idemdemo -store 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable&create_table=true'
//	go run ./cmd/idemdemo storm           # duplicate storm against an in-process server
//
// # Endpoints
//
// Every request names its caller in the X-User-Id header. The demo trusts
// that header as if an authenticating gateway in front of it had set it
// (and stripped any value the client sent): it has no authentication of its
// own, so do not expose it beyond localhost. A request without the header
// gets 401. Errors are application/problem+json (RFC 9457).
//
//	POST /orders        Idempotency-Key mode: a retry with the same key gets the
//	                    first response (Idempotent-Replayed: true); 409 while the
//	                    first is still running, 422 when the key is reused with
//	                    another body, 400 without a key.
//	POST /orders/quick  dedup window: the same body from the same caller within
//	                    -window gets 409 with Retry-After.
//	POST /tokens        issues a one-time token for the caller (201
//	                    {"token","expires_in"}).
//	POST /orders/form   token mode: the token goes in Idempotency-Token; a reuse
//	                    replays the first response, a forged token gets 400.
//	GET  /orders        the caller's orders, as a JSON array, oldest first.
//	POST /orders/paid   an order paid at the payment provider (-provider URL,
//	                    see Paid orders below); Idempotency-Key mode.
//	GET  /orders/paid   the caller's paid orders, with status and charge.
//	POST /orders/unpaid an order paid later (status unpaid), which the payment
//	                    provider's callback pays; Idempotency-Key mode.
//	GET  /orders/unpaid/{id}  the caller's order, with its notification and
//	                    transition counts.
//	POST /pay/notify    the provider's signed callback, keyed by its
//	                    transaction_id (see Pay later below); 503 without
//	                    -notify-secret-file.
//	GET  /healthz       200 when the idempotency store answers, 503 otherwise.
//	GET  /metrics       idemkit's OpenTelemetry metrics in Prometheus format
//	                    (idemkit_outcomes_total by mode and outcome,
//	                    idemkit_store_duration_seconds by store operation,
//	                    idemkit_evictions_total and
//	                    idemkit_store_refusals_total of mem:// stores (a
//	                    full one refuses new keys with 503 rather than
//	                    evict a request still running), the fallback's
//	                    breaker transitions, ...); log lines of an engine
//	                    call carry its trace_id.
//	GET  /problems/{name}, /problems/demo/{name}
//	                    a page per problem type the service answers with, at
//	                    the path of its type URI: title, status and what a
//	                    client should do; 404 for unknown names.
//
// The order routes take {"sku": "<non-empty string>", "qty": <integer > 0>}
// (unknown fields and wrong types get 400, a body over 16 KiB gets 413) and
// answer 201 with {"id","sku","qty","user"} and a Location header.
//
// Test hooks, for demonstrations and tests only: on the order routes,
// X-Demo-Delay: <duration up to 5s> sleeps before the order is created (to
// produce in-flight duplicates), X-Demo-Stall: <duration up to 5s> sleeps
// after it is created and before the answer (the window in which a crash
// leaves an order without a completed idempotency record; on PostgreSQL it
// runs inside the order's transaction, so a crash leaves neither), and
// X-Demo-Fail: 500 fails with 500 without creating anything. Headers are not
// part of the request fingerprint, so a hook never turns a retry into a
// different request.
//
// # In a browser
//
// GET / serves a page (embedded in the binary, nothing loaded from
// elsewhere) that places the same order four ways side by side: a plain
// HTML form with no protection (POST /ui/orders/unprotected), an HTML form
// with a one-time token the server renders into it (POST /ui/orders/token:
// a repeat of the token replays the first result page), a script that sends
// an Idempotency-Key minted per order and kept across its retries and a
// reload (POST /orders), and a script without any key (POST /orders/quick).
// A "simulate slow server" toggle makes each order take 1.5 s, so a second
// click lands while the first is running; the order list shows how many
// orders each way made. A browser cannot set X-User-Id on a form post, so
// the page gives the browser a random demo identity in a cookie, which every
// route accepts in place of the header (demo only: it authenticates nothing).
//
// # Layered defence
//
// The idempotency middleware stops nearly every duplicate before the
// handler runs, but it records "done" in a second write after the order was
// created. A crash between the two leaves the key "in progress" until its
// lease (-lease) expires, after which a retry runs the handler again. The
// order repository therefore keeps a unique index on (user, idempotency key)
// in the same transaction as the order, the way a SQL service would use a
// UNIQUE constraint: the retry finds the existing order and answers with it.
// The database constraint is the final guard; the idempotency layer makes it
// rarely needed and gives clients clean replays.
//
// On PostgreSQL there is no second write to lose: the order and its
// idempotency record commit in one database transaction (see Orders in
// PostgreSQL below).
//
// # Stores
//
// -store URL (or the IDEMKIT_STORE environment variable) chooses the
// idempotency store; the default, bolt://idemdemo.db, keeps the idempotency
// records and the orders in one bbolt file in the working directory, in
// separate buckets, so a restart keeps both (delete the file to start
// afresh). mem:// keeps both in process memory. postgres:// (or
// postgresql://) keeps the records in a table of PostgreSQL (package
// store/sqlstore; add create_table=true on a fresh database) and the
// orders in another table of the same database (see Orders in PostgreSQL
// below). redis://, rediss://, redis+sentinel:// and redis+cluster:// keep
// the records in Redis (see package store/redisstore for the URL forms and
// parameters), mysql:// in a table of MySQL/MariaDB, and the orders in
// process memory, at most 100,000 of them and 1,000 per user (further
// orders get 507). The banner says where the orders are. A URL the demo
// cannot use stops it at start-up with an error naming the problem. A
// store that does not answer at start-up does not stop it: the demo logs
// a warning with the store's error (a server down, a SQL table that does
// not exist: add create_table=true to the URL), GET /healthz answers 503,
// and requests get the -on-store-error policy (or the -fallback) until
// the store answers. The SQL stores are the exception: store.Open
// connects, so a PostgreSQL or MySQL server that does not answer stops the
// demo at start-up. idemproxy follows the same rule.
//
// # Orders in PostgreSQL
//
// With a postgres:// store the demo creates, at start, the table
// idemdemo_orders if it is missing (id, user_id, dedup_key, sku, qty,
// created_at) with a UNIQUE index on (user_id, dedup_key), in the store
// URL's database, and keeps the orders there, so a restart finds them.
// dedup_key holds the hex SHA-256 of the route and idempotency key (or
// token), never the key or token itself. Each order route then runs one transaction: it INSERTs the order (ON
// CONFLICT on the unique index it returns the key's existing order, or
// 422 when that order has another sku or qty), records the answer (the 201
// with its Location, or the 422) as the key's idempotency record through
// the store's view of that transaction (idemhttp.CompleteIn with
// sqlstore's Store.Tx), and COMMITs; the middleware then sends the
// recorded answer. The order and the record commit together or not at
// all: if the commit fails, the client gets 500, the key is freed and a
// retry creates the order once. An answer that is not recorded (a 5xx)
// rolls the order back. The same holds for the token form of the browser
// page; its unprotected form, and a request run unguarded under
// -on-store-error open, create their order in a transaction of its own.
//
// With a -fallback, a claim the fallback took while PostgreSQL failed is
// not in the table the order's transaction would complete, so the orders
// stay in PostgreSQL but commit on their own, before their records, as
// with the other stores (the banner says so). mysql:// keeps the orders in
// memory. Order SKUs may not contain NUL characters, which PostgreSQL
// text cannot hold (400 on every store).
//
// -fallback URL (IDEMKIT_FALLBACK), such as mem://, answers while the store
// fails, behind a circuit breaker. -on-store-error (IDEMKIT_ON_STORE_ERROR)
// says what happens when the store fails: closed (503, nothing runs
// unprotected) or open (the order is created unguarded). -budget
// (IDEMKIT_BUDGET) bounds each store call (budget.Default, 1s, by default for Redis) and
// -near-cache (IDEMKIT_NEAR_CACHE) keeps settled results in process. Flags
// override the variables; package setup documents them.
//
// # Paid orders
//
//	idemdemo provider [-addr 127.0.0.1:8090] [-store mem://] [-notify-secret-file PATH]
//	idemdemo -provider http://127.0.0.1:8090
//
// The provider subcommand runs a payment provider on its own port: POST
// /charges behind idemkit's Idempotency-Key middleware over a store of its
// own, fenced (it keeps the highest Idempotency-Fence token per key in
// memory and refuses a lower one with 409), and GET /charges, which counts
// the calls, charges, keys charged twice and stale calls refused.
//
// POST /orders/paid runs, under the request's claim, three recovery points
// (idemkit.Step): "reserve stock" stores the order as reserved; "charge"
// calls the provider through idemhttp.Transport with the step's derived
// key (idemkit.StepKey) as Idempotency-Key and the claim's fencing token;
// "mark paid" stores the charge on the order. It answers 201 with
// {"id","sku","qty","user","status":"paid","charge"}. A step that fails
// answers 5xx, which is not recorded: the retry replays the finished steps
// and resumes at the failed one, so the provider sees one key per order.
// On PostgreSQL (without a fallback) the paid orders are rows of
// idemdemo_paid_orders and each write commits with its step's record
// (idemkit.RecordStepIn); on the other stores they are kept in the
// store's keyspace (one value per user, under a digest of the user),
// written idempotently, for 30 days.
//
// -crash-hooks enables the test headers X-Demo-Pause-After: reserve,
// charge-call, charge or paid (pause at that step boundary, logging
// "crash hook: paused") and X-Demo-Pause-For: <duration up to 5s> (without
// it the pause lasts until the request ends). After a pause at
// charge-call the call is sent even if the claim was lost meanwhile, as by
// a caller that does not know: the provider's fence refuses it. Without
// the flag these headers get 400.
//
// # Pay later
//
//	idemdemo -notify-secret-file /run/secrets/payments-webhook
//
// POST /orders/unpaid stores an order as unpaid, for qty × 1200 cents.
// The payment provider then calls POST /pay/notify with
// {"transaction_id":"tx_…","order":<id>,"status":"paid","amount_cents":N},
// signed with the shared secret of -notify-secret-file (the file's bytes,
// a trailing line break dropped, at least 16 bytes; the secret is never
// printed or logged): X-Signature: sha256=<hex HMAC-SHA256 of the raw
// body>. The route runs idemhttp's callback profile keyed by
// transaction_id (idemhttp.Callback, KeyFromJSON, SignedPrincipal): an
// unsigned or forged callback gets 401 and touches no record; a duplicate
// gets the first 200, replayed, or waits for it while the first runs; a
// transaction number reused with another order, status or amount gets
// 422. The handler records the notification under its transaction number
// and moves the order from unpaid to paid only if it is unpaid (a second
// transaction for a paid order is recorded and answered 200, without a
// change); it answers 200 {"transaction_id","order","status","paid_by"},
// 404 for an unknown order and 422 for a wrong amount (not recorded: the
// provider's retry runs again). On PostgreSQL (without a fallback) the
// notification row (idemdemo_notifications), the conditional UPDATE of
// idemdemo_unpaid_orders and the idempotency record commit in one
// transaction; on the other stores the order is a document in the store's
// keyspace, changed with one compare-and-swap, and the record is completed
// after it.
//
// The provider calls back too: run it with the same -notify-secret-file,
// and a charge whose body has "notify_url" (POST /charges
// {"amount_cents","order","notify_url":"http://127.0.0.1:8080/pay/notify"})
// makes it send that signed callback, its charge id as transaction_id,
// retried with a growing delay (50 ms to 2 s, for up to 5 minutes) until
// it gets a 2xx; GET /charges counts the callbacks sent and acknowledged.
//
// # Storm
//
//	idemdemo storm [-url URL] [-n 50] [-users 5] [-store URL]
//
// For each user it sends n concurrent copies of one logical submission to
// each mode (the same Idempotency-Key; the same body; the same token), then
// counts the orders through GET /orders and prints, per mode, the requests
// sent, orders created, replays, conflicts (409), other rejections (4xx),
// errors and the p50 and p99 latency. Each submission is checked on its
// own: it must have made exactly one order, and at most one of its copies
// may have run the handler (a fresh 201); the command exits with status 1
// otherwise. Without -url it starts
// its own server on a loopback port over -store (by default a temporary
// bbolt file; IDEMKIT_STORE and the other IDEMKIT_* variables are ignored,
// so a storm never writes into the store a service uses); -url must be a
// loopback address.
//
// The process exits with status 2 on a usage error, and shuts down gracefully
// on SIGINT or SIGTERM: in-flight requests finish (for up to 10 s, after which
// their connections are closed and their contexts cancelled), and the store
// is closed only once every handler has returned.
package main
