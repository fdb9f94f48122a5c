#!/usr/bin/env bash
# Runs every check and test of the module: gofmt, go vet, and
# go test -race ./... (which starts its own redis-server processes on free
# loopback ports). Installs redis-server, and chromium for the browser tests
# of cmd/idemdemo, with apt-get where they are missing.
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

# --- Chromium, for the browser tests of cmd/idemdemo (TestBrowser) ---------
# Debian's chromium package, installed with apt-get when missing. Once it is
# there the tests require it (IDEMDEMO_CHROMIUM); only when it cannot be
# installed do they skip, saying why.
if ! command -v chromium >/dev/null; then
  echo "== installing chromium (apt-get), for the browser tests"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  { $SUDO apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; } ||
    echo "warning: chromium could not be installed; the browser tests will be skipped" >&2
fi
if command -v chromium >/dev/null; then
  export IDEMDEMO_CHROMIUM="$(command -v chromium)"
fi
# ---------------------------------------------------------------------------

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bench/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

# The library is the root module; the programs (cmd) and integrations with
# large dependency trees (otel) are nested modules tied together by go.work,
# so the library's users never get their dependencies.
packages=(./... ./cmd/... ./otel/...)

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
