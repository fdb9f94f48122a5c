#!/usr/bin/env bash
# Prints the Redis server work per op of every stack and scenario: the
# server main thread's CPU time (user + system, INFO cpu; it includes
# reading requests and writing replies) and, per command, calls and
# microseconds from INFO commandstats (CONFIG RESETSTAT before each
# benchmark).
#
#   ./bench/stack-work.sh            # from the repository root (or anywhere)
#   OPS=5000 ./bench/stack-work.sh
#   CALLGRIND=1 ./bench/stack-work.sh   # Redis instructions per op (valgrind)
#
# Commands run inside a Lua script (EVALSHA) or MULTI/EXEC are counted by
# Redis on their own as well as inside the script's or EXEC's time, so the
# per-command lines of such a stack do not add up; the main-thread figure
# is the total. Each benchmark runs a fixed OPS requests, one after another
# (the same serial scenarios as run.sh), after one warm-up request.
#
# With CALLGRIND=1, redis-server runs under valgrind --tool=callgrind
# (--hz 1, serverCron not counted; see redis.sh) and the table gives
# instead the server's instructions per op, which a loaded machine does
# not skew: each benchmark zeroes the counters after its warm-up request
# and dumps them after its OPS requests (callgrind_control -z, -d), before
# any INFO. The ratios are to the mean of the two OneGET floors (one GET
# each) and, for first executions, to Fiber's middleware. Times under
# valgrind mean nothing, so that table leaves them out. OPS defaults to
# 2000 there.
set -euo pipefail

cd "$(dirname "$0")"
if [[ -n "${CALLGRIND:-}" ]]; then
	command -v valgrind >/dev/null && command -v callgrind_control >/dev/null ||
		{ echo "valgrind is required: apt-get install -y valgrind" >&2; exit 1; }
	export REDIS_CALLGRIND=1
	OPS="${OPS:-2000}"
else
	OPS="${OPS:-3000}"
fi
source ./redis.sh
log "$(redis-server --version | cut -d' ' -f1-3) on $IDEMKIT_BENCH_REDIS; load $(cut -d' ' -f1-3 /proc/loadavg)"
go test -c -o "$work/bench.test" .

if [[ -n "${CALLGRIND:-}" ]]; then
	log "redis-server under callgrind (pid $redis_pid), $OPS ops per benchmark"
	echo "| scenario | stack | Redis calls/op | Redis instructions/op | vs GET | vs fiber |"
	echo "| --- | --- | ---: | ---: | ---: | ---: |"
	"$work/bench.test" -test.run '^$' \
		-test.bench '^Benchmark(OneGET|FirstExecution|Replay)$' \
		-test.benchtime "${OPS}x" -test.count 1 |
		awk '
		/^Benchmark/ && /redis-instr\/op/ {
			split($1, n, "/"); sub(/^Benchmark/, "", n[1]); sub(/-[0-9]+$/, "", n[2])
			for (i = 3; i < NF; i++) {
				if ($(i+1) == "redis-calls/op") calls = $i
				if ($(i+1) == "redis-instr/op") instr = $i
			}
			k++; sc[k] = n[1]; st[k] = n[2]; ca[k] = calls; ins[k] = instr
			if (n[1] == "OneGET") { get += instr; gets++ }
			if (n[1] == "FirstExecution" && n[2] == "fiber") ffirst = instr
		}
		END {
			if (gets) get /= gets
			for (j = 1; j <= k; j++) {
				vg = get ? sprintf("%.2fx", ins[j] / get) : ""
				vf = (sc[j] == "FirstExecution" && ffirst) ? sprintf("%.2fx", ins[j] / ffirst) : ""
				printf "| %s | %s | %s | %.0f | %s | %s |\n", sc[j], st[j], ca[j], ins[j], vg, vf
			}
		}'
	exit
fi

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
