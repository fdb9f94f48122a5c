#!/usr/bin/env bash
# Benchmarks idemkit's net/http Idempotency-Key middleware against Fiber v3's
# middleware/idempotency, both over Redis, and prints a markdown table.
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
work="$(mktemp -d "${TMPDIR:-/tmp}/idemkit-bench.XXXXXX")"
redis_pid=""

cleanup() {
	if [[ -n "$redis_pid" ]]; then
		kill "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '==> %s\n' "$*" >&2; }

install_redis() {
	command -v redis-server >/dev/null && return
	log "redis-server not found: installing it with apt-get"
	command -v apt-get >/dev/null || { log "no apt-get: install redis-server (6.2 or later) yourself"; exit 1; }
	local sudo=""
	[[ "$(id -u)" -eq 0 ]] || sudo="sudo"
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null
}

# start_redis PORT: starts redis-server on 127.0.0.1:PORT and waits until it
# accepts connections. Fails (returns 1) when the server exits, e.g. because
# the port is taken.
start_redis() {
	local port="$1" logf="$work/redis.log"
	: >"$logf"
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
		--dir "$work" --logfile "$logf" --daemonize no &
	redis_pid=$!
	for _ in $(seq 100); do
		if grep -q "Ready to accept connections" "$logf"; then
			return 0
		fi
		if ! kill -0 "$redis_pid" 2>/dev/null; then
			wait "$redis_pid" 2>/dev/null || true
			redis_pid=""
			return 1
		fi
		sleep 0.1
	done
	log "redis-server did not become ready:"; cat "$logf" >&2
	exit 1
}

# pick_port tries random high ports until redis-server starts on one, and
# sets port to it.
port=""
pick_port() {
	local p
	for _ in $(seq 20); do
		p=$((20000 + RANDOM % 40000))
		if start_redis "$p"; then
			port="$p"
			return
		fi
	done
	log "could not start redis-server on a free port:"; cat "$work/redis.log" >&2
	exit 1
}

install_redis
pick_port
export IDEMKIT_BENCH_REDIS="127.0.0.1:${port}"
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

An op is one request in the NoMiddleware, FirstExecution and Replay rows
(sent one after another over a keep-alive connection), and one storm of 50
concurrent requests with the same key, spread over two service instances
sharing one Redis, in the Duplicates rows (the handler takes 10 ms there).
Client, servers and Redis share the machine; B/op and allocs/op count client
and server together. Redis calls are round trips made by the middleware.
EOF
