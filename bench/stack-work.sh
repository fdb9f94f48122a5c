#!/usr/bin/env bash
# Prints the Redis server work per op of every stack and scenario: the
# server main thread's CPU time (user + system, INFO cpu; it includes
# reading requests and writing replies) and, per command, calls and
# microseconds from INFO commandstats (CONFIG RESETSTAT before each
# benchmark).
#
#   ./bench/stack-work.sh            # from the repository root (or anywhere)
#   OPS=5000 ./bench/stack-work.sh
#
# Commands run inside a Lua script (EVALSHA) or MULTI/EXEC are counted by
# Redis on their own as well as inside the script's or EXEC's time, so the
# per-command lines of such a stack do not add up; the main-thread figure
# is the total. Each benchmark runs a fixed OPS requests, one after another
# (the same serial scenarios as run.sh), after one warm-up request.
set -euo pipefail

OPS="${OPS:-3000}"

cd "$(dirname "$0")"
source ./redis.sh
log "$(redis-server --version | cut -d' ' -f1-3) on $IDEMKIT_BENCH_REDIS; load $(cut -d' ' -f1-3 /proc/loadavg)"
go test -c -o "$work/bench.test" .

echo "| scenario | stack | Redis calls/op | main thread µs/op | commands (calls/op, µs/op) |"
echo "| --- | --- | ---: | ---: | --- |"
IDEMKIT_BENCH_REDIS_DETAIL=1 "$work/bench.test" -test.run '^$' \
	-test.bench '^Benchmark(OneGET|FirstExecution|Replay)$' \
	-test.benchtime "${OPS}x" -test.count 1 |
	awk '
	/^Benchmark/ {
		split($1, n, "/"); sub(/^Benchmark/, "", n[1]); sub(/-[0-9]+$/, "", n[2])
		for (i = 3; i < NF; i++) if ($(i+1) == "redis-calls/op") calls = $i
		name = n[1] " | " n[2]
	}
	/redis work per op/ {
		line = $0; sub(/.*main thread /, "", line)
		split(line, parts, ";")
		cpu = parts[1]; sub(/ µs/, "", cpu)
		cmds = ""
		for (i = 2; i < length(parts); i++) {
			c = parts[i]; sub(/^ /, "", c)
			split(c, f, " ")
			cmds = cmds (cmds == "" ? "" : ", ") toupper(f[1]) " " f[2] "/" f[4]
		}
		printf "| %s | %s | %s | %s |\n", name, calls, cpu, cmds
	}'
