#!/usr/bin/env bash
# Installs the testbed's real components (docs/testbed.md), and with them everything the real-stack
# tests use (tests/conftest.py, COMPONENTS):
#   HAProxy, nginx (router.kind = "nginx"), PostgreSQL and the Ruby servers (Ruby, Puma, Unicorn, the pg gem, Rack and
#   Rack::Timeout) from
#   Debian's packages (as root, with apt-get), with Chromium for the browser tests, and
#   gunicorn, gevent and psycopg into the Python environment given as $1 (default: python3).
# Services are not started: the testbed starts its own HAProxy, nginx and PostgreSQL for each run.
set -euo pipefail
PY="${1:-python3}"

need_apt=()
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || need_apt+=(haproxy)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need_apt+=(nginx)
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || command -v postgres >/dev/null || need_apt+=(postgresql)
# app.server = "puma" / "unicorn" run the real Ruby servers with dynosim's Rack app (app.ru).
command -v ruby >/dev/null || need_apt+=(ruby)
command -v puma >/dev/null || need_apt+=(puma)
command -v unicorn >/dev/null || need_apt+=(unicorn)
ruby -e 'require "pg"' 2>/dev/null || need_apt+=(ruby-pg)
ruby -e 'require "rack"' 2>/dev/null || need_apt+=(ruby-rack)
# app.wait_timeout under Puma and Unicorn: Rack::Timeout itself (pure Ruby, 22 kB).
ruby -e 'require "rack-timeout"' 2>/dev/null || need_apt+=(ruby-rack-timeout)
# The browser tests drive Debian's Chromium (never a browser download of Playwright's own).
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "install-testbed: missing ${need_apt[*]}; install as root: apt-get install ${need_apt[*]}" >&2
    exit 1
  fi
  # Keep the packages' own services from starting (policy-rc.d: 101 = action forbidden),
  # unless the machine already has a policy of its own.
  made_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  trap '[ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# gunicorn 23+ (the worker classes, --threads), gevent, psycopg 3.1.14+ (gevent support).
"$PY" -m pip install -q "gunicorn>=23,<28" "gevent>=24" "psycopg[binary]>=3.1.14,<4"
echo "install-testbed: haproxy, nginx, postgresql, ruby, puma, unicorn, ruby-pg, ruby-rack, ruby-rack-timeout, chromium, gunicorn, gevent, psycopg ready"
