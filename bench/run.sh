#!/usr/bin/env bash
# Benchmarks idemkit's Idempotency-Key middlewares (adapters/idemhttp on
# net/http, adapters/idemfiber on Fiber) against Fiber v3's
# middleware/idempotency, all over Redis, and prints markdown tables.
#
#   ./bench/run.sh                      # from the repository root (or anywhere)
#   COUNT=3 BENCHTIME=500ms ./bench/run.sh
#
# It starts its own redis-server on a free loopback port (no persistence, in a
# temporary directory, stopped on exit), runs the bench module's tests (with
# -race), then runs every benchmark COUNT times (passes interleaved, so drift
# on a busy machine spreads over all rows) and prints the median of each cell.
# redis-server is installed with apt-get when it is missing.
set -euo pipefail

COUNT="${COUNT:-5}"
BENCHTIME="${BENCHTIME:-1s}"

cd "$(dirname "$0")"
source ./redis.sh
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime; }
log "$(redis-server --version | cut -d' ' -f1-3) on $IDEMKIT_BENCH_REDIS; $(go version); $(nproc) CPUs; load $(load)"

log "tests (-race)"
go test -count=1 -race ./...

log "building the benchmark binary"
go test -c -o "$work/bench.test" .

raw="$work/bench.txt"
for pass in $(seq "$COUNT"); do
	log "benchmarks, pass $pass of $COUNT (-benchtime $BENCHTIME)"
	"$work/bench.test" -test.run '^$' -test.bench . -test.benchmem \
		-test.benchtime "$BENCHTIME" -test.count 1 | tee -a "$raw" |
		{ grep -vE '^(goos|goarch|pkg|cpu):|^PASS$' >&2 || true; }
done

log "results (median of $COUNT runs); load average now $(load)"
echo
go run ./cmd/benchtable <"$raw"
cat <<'EOF'

An op is one request in the NoMiddleware, OneGET, FirstExecution and Replay
rows (sent one after another over a keep-alive connection), one request to
every stack and floor in turn in the paired table (p50 of each), and one storm
of 50 concurrent requests with the same key, spread over two service
instances sharing one Redis, in the Duplicates rows (the handler takes 10 ms
there). Ratios are paired within a pass, then the median of the passes.
Client, servers and Redis share the machine; B/op and allocs/op count client
and server together. Redis calls are round trips made by the middleware;
Redis µs/op is the server main thread's CPU time per op (I/O included).
EOF
