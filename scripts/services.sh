#!/usr/bin/env bash
# Make sure Redis (127.0.0.1:6379) and PostgreSQL (127.0.0.1:5432, trust auth, database `test`)
# are running for the test suite: install them with apt when missing, start them when stopped.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v pg_ctlcluster >/dev/null 2>&1 || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi

version=$(ls /etc/postgresql | sort -V | tail -n 1)
if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
fi
for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done

# A fresh Debian cluster asks for passwords on TCP: trust loopback, as the test machines do.
if ! psql -h 127.0.0.1 -U postgres -d postgres -tAc 'select 1' >/dev/null 2>&1; then
  hba="/etc/postgresql/$version/main/pg_hba.conf"
  as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  sleep 1
fi
if ! psql -h 127.0.0.1 -U postgres -d postgres -tAc "select 1 from pg_database where datname='test'" | grep -q 1; then
  psql -h 127.0.0.1 -U postgres -d postgres -c 'create database test' >/dev/null
fi
redis-cli -h 127.0.0.1 ping >/dev/null && psql -h 127.0.0.1 -U postgres -d test -tAc 'select 1' >/dev/null
echo "services: redis and postgresql ready"
