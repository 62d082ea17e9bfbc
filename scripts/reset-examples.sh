#!/usr/bin/env bash
# Puts the example pair's demo data back as it was first made (`make reset`):
# drops and recreates the databases jfast_billing and jfast_orders (the next
# `make run` migrates them again, which brings the catalogue back), empties the
# receipts directory and deletes orders' keys from Redis (its "orders:" prefix:
# the stock cache and the order.paid stream), nothing else.
#
# Stop `make run` first: it refuses while 127.0.0.1:8000 or :8010 answer.
#
# Environment: PGHOST, PGPORT, PGUSER (127.0.0.1, 5432, postgres);
# JFAST_EXAMPLES_DIR (default /tmp/jfast-examples) as for make run;
# JFAST_CACHE_URL for Redis (default redis://127.0.0.1:6379/0);
# BILLING_DB, ORDERS_DB and ORDERS_PREFIX (the Redis prefix, orders' app.name)
# to reset another copy than the examples' own.
set -euo pipefail

PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
export PGHOST PGPORT PGUSER
dir=${JFAST_EXAMPLES_DIR:-/tmp/jfast-examples}
databases=("${BILLING_DB:-jfast_billing}" "${ORDERS_DB:-jfast_orders}")
redis_url=${JFAST_CACHE_URL:-redis://127.0.0.1:6379/0}
prefix=${ORDERS_PREFIX:-orders}

say() { printf '==> %s\n' "$*"; }
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

for addr in 127.0.0.1:8010 127.0.0.1:8000; do
  if port_open "${addr%:*}" "${addr#*:}"; then
    echo "reset-examples: $addr answers (make run?); stop it first" >&2
    exit 1
  fi
done

command -v psql >/dev/null || { echo "reset-examples: psql not found" >&2; exit 1; }
for db in "${databases[@]}"; do
  [[ $db =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "reset-examples: $db is not a plain database name" >&2; exit 1; }
  psql -d postgres -v ON_ERROR_STOP=1 -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  say "database $db made empty (make run migrates it and puts the catalogue back)"
done

if [ -d "$dir/receipts" ]; then
  find "$dir/receipts" -mindepth 1 -delete
  say "receipts in $dir/receipts deleted"
fi

if command -v redis-cli >/dev/null; then
  n=0
  while IFS= read -r key; do
    [ -n "$key" ] || continue
    redis-cli -u "$redis_url" DEL "$key" >/dev/null
    n=$((n + 1))
  done < <(redis-cli -u "$redis_url" --scan --pattern "$prefix:*" 2>/dev/null || true)
  say "$n Redis keys under $prefix: deleted"
else
  say "redis-cli not found: the stock cache expires within 30 s on its own"
fi
