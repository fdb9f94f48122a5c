#!/usr/bin/env bash
# Runs every check and test of the module: gofmt, go vet, and
# go test -race ./... (which starts its own redis-server processes on free
# loopback ports). Installs redis-server with apt-get where it is missing, and
# starts (installing if needed) nats-server and RabbitMQ for the queue adapters.
#
#   ./scripts/test.sh            all checks and tests
#   ./scripts/test.sh -run Foo   extra flags go to go test
set -euo pipefail
cd "$(dirname "$0")/.."

need_redis() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null
}
if ! need_redis; then
  echo "== installing redis-server (apt-get)"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
  # The package may start a server on 6379; the tests never use it.
fi
need_redis || { echo "redis-server is required by the tests and could not be installed" >&2; exit 1; }

# --- message brokers: queue/idemnats and queue/idemamqp (issue 17) ---------
# Their tests use a JetStream nats-server on 127.0.0.1:4222 and a RabbitMQ on
# 127.0.0.1:5672 (guest/guest), each with streams/queues of their own that
# they create and delete. Start whichever is not answering; install it first
# when missing.
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_answers() { # port name: bounded wait
  for _ in $(seq 1 120); do answers "$1" && return 0; sleep 0.5; done
  echo "$2 did not answer on 127.0.0.1:$1 within 60s" >&2; exit 1
}
apt_install() {
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "== installing $* (apt-get)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}
if ! answers 4222; then
  [ -x /usr/sbin/nats-server ] || apt_install nats-server
  echo "== starting nats-server (JetStream) on 127.0.0.1:4222"
  nats_dir="${TMPDIR:-/tmp}/idemkit-nats"
  mkdir -p "$nats_dir"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server --     -a 127.0.0.1 -p 4222 -js -sd "$nats_dir"
  wait_answers 4222 nats-server
fi
if ! answers 5672; then
  command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server
  echo "== starting rabbitmq-server on 127.0.0.1:5672"
  rabbitmq-server -detached
  wait_answers 5672 rabbitmq-server
fi
# --- end message brokers ----------------------------------------------------

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bench/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

# The library is the root module; the programs (cmd) and integrations with
# large dependency trees (otel, the queue adapters and their broker clients)
# are nested modules tied together by go.work, so the library's users never
# get their dependencies.
packages=(./... ./cmd/... ./otel/... ./queue/idemnats/... ./queue/idemamqp/...)

echo "== go vet"
go vet "${packages[@]}"

echo "== staticcheck"
# Pinned, installed from the Go module proxy on first use; config in staticcheck.conf.
staticcheck_version=v0.8.2
staticcheck="$(go env GOPATH)/bin/staticcheck"
if ! "$staticcheck" -version 2>/dev/null | grep -q "${staticcheck_version#v}"; then
  GOFLAGS= GOWORK=off go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
fi
"$staticcheck" "${packages[@]}"

echo "== pure-Go cross builds (CGO_ENABLED=0)"
for target in linux/arm64 windows/amd64 darwin/arm64; do
  CGO_ENABLED=0 GOOS=${target%/*} GOARCH=${target#*/} go build "${packages[@]}"
done

echo "== go test -race"
go test -race -count=1 -timeout 20m "$@" "${packages[@]}"
