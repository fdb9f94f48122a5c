#!/usr/bin/env bash
# Measures what redisstore's operations cost the Redis server per operation
# (its work, not the client's): a replay (SetNX on a present key) and a first
# execution (SetNX on an absent key, then CompareAndSwap, as the engine
# completes it), each through the Lua scripts (before) and through plain
# commands in MULTI/EXEC (after), and with SetNXValue (one SET NX PX GET,
# the claim the engine's Do makes on Redis 7.0+), beside a plain GET (the
# floor).
#
#   ./bench/redis-work.sh                 # CPU time and INFO commandstats
#   CALLGRIND=1 ./bench/redis-work.sh     # also instructions per op (valgrind)
#   OPS=5000 ./bench/redis-work.sh
#   KEYLEN=67 CALLGRIND=1 ./bench/redis-work.sh   # claim key names of 67 bytes
#
# Columns: cpu-us/op is the server's used_cpu_user+used_cpu_sys per operation
# (network I/O included; shared machines make it noisy); cmd-us/op sums the
# commandstats usec of the commands the client sent (EVALSHA, MULTI, EXEC,
# GET: a script's or EXEC's time includes the commands run inside it);
# instr/op counts redis-server's instructions under callgrind (user space
# only; not disturbed by load), the measure issue 14 quotes.
#
# It runs TestRedisWork in store/redisstore (skipped unless REDISSTORE_WORK=1).
# Without CALLGRIND the test starts its own redis-server; with it, this script
# starts one under valgrind --tool=callgrind (--hz 1, serverCron not
# counted) on a free loopback port, in a temporary directory removed on exit.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

run_test() {
	go test -count=1 -run '^TestRedisWork$' -v ./store/redisstore/ |
		grep -v -e '^=== ' -e '^--- ' -e '^PASS$' -e '^ok ' -e 'pool.go'
}

if [[ -z "${CALLGRIND:-}" ]]; then
	REDISSTORE_WORK=1 REDISSTORE_WORK_OPS="${OPS:-20000}" REDISSTORE_WORK_KEYLEN="${KEYLEN:-}" run_test
	exit
fi

command -v valgrind >/dev/null || { echo "valgrind not found: apt-get install -y valgrind" >&2; exit 1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/redis-work.XXXXXX")"
pid=""
cleanup() {
	if [[ -n "$pid" ]]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=""
for _ in $(seq 1 50); do
	p=$((20000 + RANDOM % 20000))
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		port="$p"
		break
	fi
done
[[ -n "$port" ]] || { echo "no free port found" >&2; exit 1; }

# serverCron is left out of the counts (--collect-atstart=yes must follow
# --toggle-collect, which turns it off): its jemalloc statistics cost about
# 120k instructions a call, hundreds per operation at valgrind's pace.
valgrind --tool=callgrind --toggle-collect=serverCron --collect-atstart=yes \
	--callgrind-out-file="$work/callgrind.out" \
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	--hz 1 --dir "$work" >"$work/valgrind.log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do
	redis-cli -p "$port" ping >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/valgrind.log" >&2; exit 1; }
	sleep 0.5
done

REDISSTORE_WORK=1 REDISSTORE_WORK_OPS="${OPS:-3000}" REDISSTORE_WORK_KEYLEN="${KEYLEN:-}" \
	REDISSTORE_WORK_ADDR="127.0.0.1:$port" \
	REDISSTORE_WORK_CALLGRIND="$pid" \
	REDISSTORE_WORK_CALLGRIND_OUT="$work/callgrind.out" \
	run_test
