#!/usr/bin/env bash
# Runs every check and test of the module: gofmt, go vet, and
# go test -race ./... (which starts its own redis-server processes on free
# loopback ports), the nested modules' too, the bench module's tests among
# them (over a throwaway redis-server on a free loopback port, started by
# bench/redis.sh and stopped on exit). Installs redis-server with apt-get
# where it is missing.
# The other services the tests need are started when they are not answering,
# and installed with apt-get first when missing:
#   - PostgreSQL on 127.0.0.1:5432 (trust, user postgres) and MariaDB on
#     127.0.0.1:3306 (root, no password) for the SQL store, whose tests
#     create and drop their own databases; IDEMKIT_TEST_POSTGRES_DSN and
#     IDEMKIT_TEST_MYSQL_DSN point them elsewhere (the local servers are
#     then left alone);
#   - nats-server with JetStream on 127.0.0.1:4222 and RabbitMQ on
#     127.0.0.1:5672 (guest/guest) for the queue adapters and the outbox
#     relay (queue/idemrelay, which also needs both SQL servers), whose
#     tests create and delete their own streams, queues and databases;
#   - Node.js and npm (Debian's) and dynalite (npm, a DynamoDB-compatible
#     server, installed once under ~/.cache/idemkit) for store/dynamostore,
#     whose tests start it on free loopback ports;
#   - Debian's chromium for the browser tests of cmd/idemdemo (TestBrowser),
#     which then require it; they skip only when it cannot be installed.
#
#   ./scripts/test.sh            all checks and tests
#   ./scripts/test.sh -run Foo   extra flags go to go test
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
apt_install() {
  echo "== installing $* (apt-get)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

need_redis() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null
}
# The package may start a server on 6379; the tests never use it.
need_redis || apt_install redis-server
need_redis || { echo "redis-server is required by the tests and could not be installed" >&2; exit 1; }
# wait_for NAME CMD...: waits up to 60s until CMD succeeds.
wait_for() {
  local name=$1; shift
  for _ in $(seq 120); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "$name is not answering" >&2
  return 1
}
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# --- message brokers: queue/idemnats and queue/idemamqp ----------------------
if ! answers 4222; then
  [ -x /usr/sbin/nats-server ] || apt_install nats-server
  echo "== starting nats-server (JetStream) on 127.0.0.1:4222"
  nats_dir="${TMPDIR:-/tmp}/idemkit-nats"
  mkdir -p "$nats_dir"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd "$nats_dir"
  wait_for nats-server answers 4222
fi
if ! answers 5672; then
  command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server
  echo "== starting rabbitmq-server on 127.0.0.1:5672"
  rabbitmq-server -detached
  wait_for rabbitmq-server answers 5672
fi

# --- SQL databases: store/sqlstore --------------------------------------------
pg_answers() { psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1'; }
maria_answers() { mysql -h 127.0.0.1 -u root -e 'select 1'; }

if [ -z "${IDEMKIT_TEST_POSTGRES_DSN:-}" ] && ! pg_answers >/dev/null 2>&1; then
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    apt_install postgresql postgresql-client
  fi
  version=$(ls /etc/postgresql | sort -V | tail -1)
  conf=/etc/postgresql/$version/main
  # The tests connect over loopback TCP as postgres without a password.
  if ! $SUDO grep -qE '^host\s+all\s+all\s+127\.0\.0\.1/32\s+trust' "$conf/pg_hba.conf"; then
    echo "host all all 127.0.0.1/32 trust" | $SUDO tee "$conf/pg_hba.conf.idemkit" >/dev/null
    $SUDO sh -c "cat '$conf/pg_hba.conf' >> '$conf/pg_hba.conf.idemkit' && mv '$conf/pg_hba.conf.idemkit' '$conf/pg_hba.conf'"
  fi
  echo "== starting PostgreSQL $version"
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start ||
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main reload || true
  wait_for PostgreSQL pg_answers
fi

if [ -z "${IDEMKIT_TEST_MYSQL_DSN:-}" ] && ! maria_answers >/dev/null 2>&1; then
  if [ ! -x /usr/sbin/mariadbd ]; then
    apt_install mariadb-server mariadb-client
  fi
  echo "== starting MariaDB"
  $SUDO mkdir -p /run/mysqld && $SUDO chown mysql:mysql /run/mysqld 2>/dev/null || true
  $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
  # mysqladmin ping succeeds once the server is up, even if access is denied.
  wait_for MariaDB mysqladmin --protocol=tcp -h 127.0.0.1 ping
  if ! maria_answers >/dev/null 2>&1; then
    # root over TCP without a password (the package default is unix_socket).
    $SUDO mysql -u root -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket"
  fi
  wait_for MariaDB maria_answers
fi

# --- dynalite (npm), a DynamoDB-compatible server: dynamostore, idemlambda -
# Installed once per machine under ~/.cache/idemkit; the tests start it on
# a free loopback port and stop it. DYNALITE_CLI names its cli.js.
command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
DYNALITE_CLI="$(./store/dynamostore/install-dynalite.sh)"
export DYNALITE_CLI

# --- python3: the order backend of idemproxy's integration tests -----------
command -v python3 >/dev/null || apt_install python3

# --- curl and jq: the shell sessions of README.md and docs/ (internal/readme)
command -v curl >/dev/null || apt_install curl
command -v jq >/dev/null || apt_install jq

# --- Chromium: the browser tests of cmd/idemdemo (TestBrowser) --------------
# Once installed the tests require it (IDEMDEMO_CHROMIUM); only when it
# cannot be installed do they skip, saying why.
command -v chromium >/dev/null || apt_install chromium ||
  echo "warning: chromium could not be installed; the browser tests will be skipped" >&2
if command -v chromium >/dev/null; then
  export IDEMDEMO_CHROMIUM="$(command -v chromium)"
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bench/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

# The library is the root module; the programs (cmd) and integrations with
# large dependency trees (otel, the queue adapters and their broker clients,
# the Fiber adapter) are nested modules tied together by go.work, so the
# library's users never get their dependencies.
packages=(./... ./cmd/... ./otel/... ./queue/idemnats/... ./queue/idemamqp/... ./adapters/idemfiber/... ./adapters/idemlambda/... ./store/dynamostore/... ./queue/idemrelay/... ./adapters/idemgin/... ./adapters/idemecho/... ./adapters/idemconnect/... ./bench/...)

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
library=()
for p in "${packages[@]}"; do [ "$p" = ./bench/... ] || library+=("$p"); done
go test -race -count=1 -timeout 20m "$@" "${library[@]}"

# The bench module's tests check the middlewares the benchmarks measure and
# need a Redis: bench/redis.sh starts one on a free loopback port, exports
# IDEMKIT_BENCH_REDIS, and stops it when this subshell ends. The variable
# stays out of the other tests' environment, where the programs refuse an
# IDEMKIT_* variable they do not know.
(source ./bench/redis.sh && go test -race -count=1 -timeout 10m "$@" ./bench/...)
