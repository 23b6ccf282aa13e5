#!/usr/bin/env bash
# Installs what the tests need when it is missing: redis-server (the tests
# start their own on free ports), promtool (alert rule tests), chromium
# (the status page is tested in headless Chromium) and PostgreSQL (the
# postgres backend's tests use the server on 127.0.0.1:5432 with trust
# authentication for user postgres) and nats-server (the JetStream
# relay's tests use a server with JetStream on 127.0.0.1:4222) and etcd
# (etcd-server: the etcd backend's tests start their own on free ports), from
# Debian's packages; then starts the PostgreSQL cluster and nats-server
# when they are not running. Idempotent; prints what it does.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v promtool >/dev/null 2>&1 || [ -x /usr/bin/promtool ] || need+=(prometheus)
# Without recommends Chromium brings no font; DejaVu gives the page's
# screenshots legible text on a bare machine.
command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-dejavu-core)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || need+=(nats-server)
command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ] || need+=(etcd-server)
pg_new=false
if ! ls -d /etc/postgresql/*/main >/dev/null 2>&1; then
  need+=(postgresql)
  pg_new=true
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: need root (or sudo) to apt-get install ${need[*]}" >&2; exit 1
  fi
fi

# start_postgres starts the installed cluster unless it runs; on a cluster
# this script installed, it first lets the tests in: listen on 127.0.0.1,
# trust local connections (a test-only server).
start_postgres() {
  local v
  v=$(ls /etc/postgresql | sort -V | tail -n1)
  if $pg_new; then
    echo "install-deps: PostgreSQL $v: listen on 127.0.0.1:5432, trust authentication (for the tests)"
    printf "listen_addresses = '127.0.0.1'\nport = 5432\n" | $SUDO tee "/etc/postgresql/$v/main/conf.d/90-onetick-tests.conf" >/dev/null
    $SUDO sed -i '1i local all all trust\nhost all all 127.0.0.1/32 trust' "/etc/postgresql/$v/main/pg_hba.conf"
  fi
  if ! pg_lsclusters -h "$v" main 2>/dev/null | grep -q online; then
    echo "install-deps: starting PostgreSQL $v"
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$v" main start
  fi
}

# start_nats starts nats-server with JetStream on 127.0.0.1:4222 unless
# something answers there.
start_nats() {
  if (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then return 0; fi
  local bin dir
  bin=$(command -v nats-server || echo /usr/sbin/nats-server)
  dir=${TMPDIR:-/tmp}/onetick-nats-js
  mkdir -p "$dir"
  echo "install-deps: starting nats-server with JetStream on 127.0.0.1:4222 (store $dir)"
  setsid "$bin" -a 127.0.0.1 -p 4222 -js -sd "$dir" -l "$dir/nats-server.log" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 1 100); do
    if (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "install-deps: nats-server did not listen on 127.0.0.1:4222 (see $dir/nats-server.log)" >&2
  exit 1
}

if [ ${#need[@]} -eq 0 ]; then
  start_postgres
  start_nats
  exit 0
fi
echo "install-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
# Don't let the packages start their own services (they would take the
# standard ports); the tests start what they need.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
# Two runs at once (two `make chaos` lanes, say) would fight over apt's
# lock: the second waits for the first here, then finds little to do.
exec 9>"${TMPDIR:-/tmp}/onetick-install-deps.lock"
flock 9
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
command -v redis-server >/dev/null
command -v promtool >/dev/null
command -v chromium >/dev/null
[ -x /usr/bin/etcd ] || command -v etcd >/dev/null
start_postgres
start_nats
