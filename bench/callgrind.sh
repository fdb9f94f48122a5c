#!/usr/bin/env bash
# Prints the instructions per request (client, server, middleware, engine
# and Redis client together: the whole benchmark process, not Redis) of
# chosen benchmarks, counted by valgrind's callgrind, which a loaded
# machine does not skew. Each benchmark runs twice, with N1 and N2
# requests; the difference divided by N2-N1 cancels start-up and set-up.
#
#   ./bench/callgrind.sh                                  # default benchmarks
#   N1=200 N2=1200 ./bench/callgrind.sh 'Replay$/^idemkit$' 'OneGET$/^nethttp$'
#
# Subtract a stack's OneGET row from a middleware row for the middleware's
# increment over its floor. Needs valgrind; the binary is built with
# CGO_ENABLED=0 and run with GODEBUG=asyncpreemptoff=1 (signals confuse the
# count otherwise) and GOMAXPROCS=1 (by default; idle Ps spinning to steal
# work add instructions that vary from run to run). ROUNDS=3 repeats each
# measurement and prints every result, to show the spread.
#
# The last column is the part of each figure spent in SHA-256's block
# function (self cost, read with callgrind_annotate). Valgrind does not
# emulate the SHA extensions, so Go runs its AVX2 code under it (about
# 2.2k instructions a block); on a CPU with SHA-NI the same block is the
# 155 instructions of the loop of blockSHANI (crypto/internal/fips140/
# sha256/sha256block_amd64.s, Go 1.26), plus about 25 to enter it.
set -euo pipefail

N1="${N1:-200}"
N2="${N2:-1200}"
ROUNDS="${ROUNDS:-1}"
export GOMAXPROCS="${GOMAXPROCS:-1}"
benches=("$@")
if [[ ${#benches[@]} -eq 0 ]]; then
	benches=('OneGET$/^nethttp$' 'OneGET$/^fiber$' 'Replay$/^idemkit$' 'Replay$/^idemkit-fiber$' 'Replay$/^fiber$'
		'FirstExecution$/^idemkit$' 'FirstExecution$/^idemkit-fiber$' 'FirstExecution$/^fiber$')
fi

cd "$(dirname "$0")"
command -v valgrind >/dev/null || { echo "valgrind is required" >&2; exit 1; }
source ./redis.sh
CGO_ENABLED=0 go test -c -o "$work/bench.test" .

# instructions BENCH N: total instructions of one run of BENCH with N ops,
# and those of SHA-256's block function.
instructions() {
	local out="$work/callgrind.$2.out"
	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$out" \
		"$work/bench.test" -test.run '^$' -test.bench "^Benchmark$1" -test.benchtime "$2x" -test.count 1 \
		>/dev/null 2>&1
	local total sha
	total="$(callgrind_annotate --auto=no "$out" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')"
	sha="$(callgrind_annotate --auto=no --threshold=100 "$out" |
		awk '/sha256\.block/ { gsub(",", "", $1); s += $1 } END { print s + 0 }')"
	rm -f "$out"
	echo "$total $sha"
}

echo "| benchmark | instructions/op | of which SHA-256 blocks |"
echo "| --- | ---: | ---: |"
for b in "${benches[@]}"; do
	per=() sha=()
	for _ in $(seq "$ROUNDS"); do
		read -r i1 s1 < <(instructions "$b" "$N1")
		read -r i2 s2 < <(instructions "$b" "$N2")
		per+=("$(( (i2 - i1) / (N2 - N1) ))")
		sha+=("$(( (s2 - s1) / (N2 - N1) ))")
	done
	name="${b//[\^\$]/}"
	echo "| $name | ${per[*]} | ${sha[*]} |"
done
