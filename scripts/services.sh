#!/usr/bin/env bash
# Start PostgreSQL and Redis on this machine when they are down (tests and CI need both).
# Exit 2 when either is not installed at all (a developer machine may have neither).
set -u
if ! command -v pg_isready >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1; then
  echo "PostgreSQL or Redis is not installed on this machine" >&2
  exit 2
fi
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
  fi
  for _ in $(seq 1 50); do pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null && break; sleep 0.2; done
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  if command -v redis-server >/dev/null 2>&1; then
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  fi
  for _ in $(seq 1 50); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.2; done
fi
pg_isready -h 127.0.0.1 -p 5432 -q && echo "postgresql: up" || { echo "postgresql: DOWN" >&2; exit 1; }
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null && echo "redis: up" || { echo "redis: DOWN" >&2; exit 1; }
