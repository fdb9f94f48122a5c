#!/usr/bin/env bash
# Instructions per iteration of Go benchmarks, counted by valgrind callgrind,
# which is stable on a loaded machine where wall-clock time is not:
#
#   CGO_ENABLED=0 go test -c -o /tmp/x.test ./pkg/
#   scripts/callgrind-ops.sh /tmp/x.test BenchmarkA BenchmarkB/sub ...
#
# For each benchmark it runs N1 and N2 iterations and prints
# (instructions(N2) - instructions(N1)) / (N2 - N1), so set-up cancels out.
# The binary must be built without cgo; Go's async preemption is turned off
# (callgrind does not survive its signals).
set -euo pipefail
bin=$1; shift
n1=${N1:-2000}
n2=${N2:-22000}
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }
count() {
  GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" \
    -test.run='^$' -test.bench="^$1\$" -test.benchtime="$2x" -test.cpu=1 2>&1 |
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
for b in "$@"; do
  a=$(count "$b" "$n1")
  z=$(count "$b" "$n2")
  echo "$b $(( (z - a) / (n2 - n1) )) instructions/op"
done
