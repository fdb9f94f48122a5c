// Package bench compares idemkit's Idempotency-Key middlewares over
// store/redisstore — adapters/idemhttp on net/http and adapters/idemfiber on
// Fiber — with Fiber v3's middleware/idempotency over its Redis storage
// (gofiber/storage/redis/v3), each beside its HTTP stack's one-GET floor.
//
// It is a separate module so that Fiber and its dependencies never enter the
// idemkit module. It holds only tests and benchmarks, plus cmd/benchtable,
// which turns `go test -bench` output into a markdown table. Both stacks serve
// the same trivial handler (it "creates an order": it counts a run and answers
// 201 with a small JSON body) on real loopback servers, reached by a
// keep-alive http.Client, and both keep their records in the same Redis.
//
// The Redis address comes from the IDEMKIT_BENCH_REDIS environment variable.
// run.sh starts a throwaway redis-server, runs the tests and the benchmarks,
// and prints the table:
//
//	./bench/run.sh
package bench
