#!/usr/bin/env bash
# Installs what the tests need when it is missing: redis-server (the tests
# start their own on free ports), promtool (alert rule tests) and chromium
# (the status page is tested in headless Chromium), from Debian's packages.
# Idempotent; prints what it does.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v promtool >/dev/null 2>&1 || [ -x /usr/bin/promtool ] || need+=(prometheus)
# Without recommends Chromium brings no font; DejaVu gives the page's
# screenshots legible text on a bare machine.
command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-dejavu-core)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${need[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: need root (or sudo) to apt-get install ${need[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# Don't let the packages start their own services (they would take the
# standard ports); the tests start what they need.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
command -v redis-server >/dev/null
command -v promtool >/dev/null
command -v chromium >/dev/null
