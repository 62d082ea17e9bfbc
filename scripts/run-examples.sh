#!/usr/bin/env bash
# Runs the examples on loopback: examples/billing on 127.0.0.1:8010,
# examples/orders on 127.0.0.1:8000, examples/inventory serving gRPC on
# 127.0.0.1:9020 (HTTP on 8020; orders reads and reserves stock through it)
# and examples/gateway in front of orders and billing on 127.0.0.1:8090
# (`make run`). Ctrl-C stops them all. Each has an admin listener
# (app.admin_listen: /status, /metrics, the complete /ready): orders' on
# 127.0.0.1:9000, billing's on 9010, inventory's on 9030, the gateway's on 9090.
#
# It uses the machine's PostgreSQL (127.0.0.1:5432, user postgres) and Redis
# (127.0.0.1:6379) when they answer, and creates what the services need: the
# databases jfast_billing and jfast_orders, and the receipts directory. When
# one is absent the services start anyway and /ready names what is missing.
#
# Environment: PGHOST, PGPORT, PGUSER (127.0.0.1, 5432, postgres) for creating
# the databases; JFAST_EXAMPLES_DIR (default /tmp/jfast-examples) for the
# binaries, the receipts and generated configuration. JFAST_* variables reach
# the services whose plugins they name (JFAST_APP_* and JFAST_DB_* both; note
# that the two need separate databases); JFAST_CACHE_URL also tells this script
# where Redis is.
set -euo pipefail
cd "$(dirname "$0")/.."

if ((BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1))); then
  echo "run-examples: needs bash 5.1 or later (wait -n -p); this is $BASH_VERSION" >&2
  exit 1
fi

GO=${GO:-go}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
export PGHOST PGPORT PGUSER
dir=${JFAST_EXAMPLES_DIR:-/tmp/jfast-examples}
mkdir -p "$dir/bin" "$dir/receipts" "$dir/config"

say() { printf '==> %s\n' "$*"; }
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

for addr in 127.0.0.1:8010 127.0.0.1:8000 127.0.0.1:8090 127.0.0.1:8020 127.0.0.1:9020 127.0.0.1:9000 127.0.0.1:9010 127.0.0.1:9030 127.0.0.1:9090; do
  if port_open "${addr%:*}" "${addr#*:}"; then
    echo "run-examples: $addr is already in use (another make run?); stop it first" >&2
    exit 1
  fi
done

say "building examples/billing, examples/orders, examples/gateway and examples/inventory"
$GO build -o "$dir/bin/billing" ./examples/billing
$GO build -o "$dir/bin/orders" ./examples/orders
$GO build -o "$dir/bin/gateway" ./examples/gateway
$GO build -o "$dir/bin/inventory" ./examples/inventory

billing_config=examples/billing/jfast.toml
orders_config=examples/orders/jfast.toml
if port_open "$PGHOST" "$PGPORT"; then
  if command -v psql >/dev/null; then
    for db in jfast_billing jfast_orders; do
      if ! psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
        psql -d postgres -qc "CREATE DATABASE $db" && say "created database $db"
      fi
    done
  else
    say "psql not found: not creating jfast_billing and jfast_orders (create them, or the boot fails migrating)"
  fi
else
  # migrate_on_start needs the database at boot: without PostgreSQL the services
  # start without it, and /ready says db fails (503: db is critical = true).
  say "PostgreSQL is not answering at $PGHOST:$PGPORT: starting without it; /ready will name db"
  sed 's/^migrate_on_start = true/migrate_on_start = false/' "$billing_config" >"$dir/config/billing.toml"
  sed 's/^migrate_on_start = true/migrate_on_start = false/' "$orders_config" >"$dir/config/orders.toml"
  billing_config=$dir/config/billing.toml
  orders_config=$dir/config/orders.toml
fi
redis_addr=127.0.0.1:6379
if [ -n "${JFAST_CACHE_URL:-}" ]; then
  redis_addr=$(sed -E 's#^rediss?://([^@/]*@)?([^/?]*).*#\2#' <<<"$JFAST_CACHE_URL")
fi
if ! port_open "${redis_addr%:*}" "${redis_addr##*:}"; then
  say "Redis is not answering at $redis_addr: starting without it; /stock reads PostgreSQL and inventory, /ready names cache"
fi

pids=()
stop() {
  trap - INT TERM
  say "stopping"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap 'stop; exit 0' INT TERM

# A JFAST_<PLUGIN>_* variable for a plugin the service does not compile in is
# not an error: the boot ignores it with a WARNING naming it (environments are
# shared between services, and a sibling's variables are not this service's
# mistake). Each service gets only the variables of its own plugins, so its
# log holds no such warning.
without() { # PLUGIN... -> env -u arguments for their JFAST_<PLUGIN>_* variables
  local v p
  for v in $(compgen -e); do
    for p in "$@"; do [[ $v == JFAST_${p}_* ]] && printf -- '-u\n%s\n' "$v"; done
  done
}
mapfile -t billing_unset < <(without CACHE HTTP QUEUE MAIL STORAGE TELEMETRY GATEWAY GRPC)
mapfile -t orders_unset < <(without IDEMPOTENCY TELEMETRY GATEWAY)
mapfile -t gateway_unset < <(without DB CACHE AUTH QUEUE MAIL STORAGE IDEMPOTENCY CHANNELS TELEMETRY APP GRPC)
mapfile -t inventory_unset < <(without DB CACHE HTTP AUTH QUEUE MAIL STORAGE IDEMPOTENCY CHANNELS TELEMETRY GATEWAY APP)

# Each service's log lines are prefixed with its name; $! is the service itself.
env "${billing_unset[@]}" JFAST_CONFIG="$billing_config" JFAST_APP_ADMIN_LISTEN=127.0.0.1:9010 "$dir/bin/billing" > >(sed -u 's/^/billing | /') 2>&1 &
pids+=($!)
receipts=()
if [ "$dir" != /tmp/jfast-examples ]; then # the root in examples/orders/jfast.toml
  receipts=(JFAST_STORAGE_DISKS__RECEIPTS__ROOT="$dir/receipts")
fi
env "${orders_unset[@]}" JFAST_CONFIG="$orders_config" JFAST_APP_ADMIN_LISTEN=127.0.0.1:9000 "${receipts[@]}" "$dir/bin/orders" > >(sed -u 's/^/orders  | /') 2>&1 &
pids+=($!)
# The gateway keeps its own listen address: JFAST_APP_* is the other two's.
env "${gateway_unset[@]}" JFAST_CONFIG=examples/gateway/jfast.toml JFAST_APP_ADMIN_LISTEN=127.0.0.1:9090 "$dir/bin/gateway" > >(sed -u 's/^/gateway | /') 2>&1 &
pids+=($!)
# Inventory keeps its own addresses too; orders finds it at 127.0.0.1:9020
# (JFAST_GRPC_UPSTREAMS__INVENTORY__TARGET elsewhere).
env "${inventory_unset[@]}" JFAST_CONFIG=examples/inventory/jfast.toml JFAST_APP_ADMIN_LISTEN=127.0.0.1:9030 "$dir/bin/inventory" > >(sed -u 's/^/invent. | /') 2>&1 &
pids+=($!)

for addr in 127.0.0.1:8010 127.0.0.1:8000 127.0.0.1:8090 127.0.0.1:9020; do
  for ((i = 0; i < 150; i++)); do
    port_open "${addr%:*}" "${addr#*:}" && break
    sleep 0.1
  done
done
say "billing on http://127.0.0.1:8010, orders on http://127.0.0.1:8000, the gateway in front of both on http://127.0.0.1:8090, inventory (gRPC) on 127.0.0.1:9020 (Ctrl-C stops them all)"
say "status pages: http://127.0.0.1:9000/status (orders), :9010/status (billing), :9030/status (inventory), :9090/status (gateway)"
say "try: TOKEN=\$(go run ./examples/orders token ada); curl -s localhost:8090/api/orders/1 -H \"Authorization: Bearer \$TOKEN\""

# A service that exits (a configuration error, a failed migration, or stopped
# on purpose to watch the other one cope) is reported; the other keeps serving
# until Ctrl-C.
status=0
live=("${pids[@]}")
while ((${#live[@]} > 0)); do
  code=0 exited=
  wait -n -p exited "${live[@]}" || code=$?
  [ -n "$exited" ] || break
  case $exited in
  "${pids[0]}") name=billing ;;
  "${pids[1]}") name=orders ;;
  "${pids[2]}") name=gateway ;;
  *) name=inventory ;;
  esac
  say "$name exited with status $code"
  ((code == 0)) || status=$code
  rest=()
  for pid in "${live[@]}"; do [ "$pid" = "$exited" ] || rest+=("$pid"); done
  live=("${rest[@]}")
done
exit "$status"
