# Sourced by run.sh, stack-work.sh and callgrind.sh: starts a throwaway
# redis-server on a free loopback port (no persistence, in a temporary
# directory $work, stopped on exit) and exports IDEMKIT_BENCH_REDIS.
# redis-server is installed with apt-get when it is missing. With
# REDIS_CALLGRIND=1 the server runs under valgrind --tool=callgrind (with
# --hz 1, serverCron not counted), writing to $work/callgrind.out, and
# IDEMKIT_BENCH_CALLGRIND and IDEMKIT_BENCH_CALLGRIND_OUT are exported for
# the benchmarks, which then report its instructions per op.
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
	local port="$1" logf="$work/redis.log" wrap=() extra=() tries=100
	if [[ -n "${REDIS_CALLGRIND:-}" ]]; then
		# serverCron (jemalloc statistics, about 120k instructions a call)
		# is left out of the counts; --collect-atstart=yes must come after
		# --toggle-collect, which turns it off.
		wrap=(valgrind --tool=callgrind --toggle-collect=serverCron --collect-atstart=yes
			--callgrind-out-file="$work/callgrind.out" --log-file="$work/valgrind.log")
		extra=(--hz 1)
		tries=1200
	fi
	: >"$logf"
	"${wrap[@]}" redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
		--dir "$work" --logfile "$logf" --daemonize no "${extra[@]}" &
	redis_pid=$!
	for _ in $(seq "$tries"); do
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
if [[ -n "${REDIS_CALLGRIND:-}" ]]; then
	export IDEMKIT_BENCH_CALLGRIND="$redis_pid" IDEMKIT_BENCH_CALLGRIND_OUT="$work/callgrind.out"
fi
