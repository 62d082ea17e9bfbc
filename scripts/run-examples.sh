#!/usr/bin/env bash
# Runs the examples on loopback: examples/billing on 127.0.0.1:8010,
# examples/orders on 127.0.0.1:8000, examples/inventory serving gRPC on
# 127.0.0.1:9020 (HTTP on 8020; orders reads and reserves stock through it)
# and examples/gateway in front of orders and billing on 127.0.0.1:8090
# (`make run`). Ctrl-C stops them all. Each has an admin listener
# (app.admin_listen: /status, /metrics, the complete /ready): orders' on
# 127.0.0.1:9000, billing's on 9010, inventory's on 9030, the gateway's on 9090.
#
# While it runs, `bash scripts/example.sh stop NAME` stops one service (to
# watch the others cope) and `bash scripts/example.sh start NAME` starts it
# again as it was first started (its admin listener included), under this
# script's supervision: its log lines come here, and Ctrl-C stops it too. The
# two talk through a FIFO in $JFAST_EXAMPLES_DIR/run, which also holds each
# running service's pid (NAME.pid).
#
# The binaries are built into $JFAST_EXAMPLES_DIR/bin first, one line each
# with the seconds so far and the packages compiled (a cold cache compiles
# about 680 packages for the four, go list -deps counts; a warm one none).
# bin/orders token ada prints a development token at once, where
# `go run ./examples/orders token ada` compiles first.
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

# build NAME: go build ./examples/NAME into $dir/bin/NAME, showing what it
# does meanwhile: go build -v names each package it compiles, so the line
# (rewritten in place on a terminal, every 10 s otherwise) says how many so
# far, the last one and the seconds elapsed.
build() {
  local name=$1 log=$dir/build-$1.log start=$SECONDS pid code=0 n last shown=-10
  # The loop reads the log at once; the background go build opens it later.
  : >"$log"
  $GO build -v -o "$dir/bin/$name" "./examples/$name" 2>"$log" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    local elapsed=$((SECONDS - start))
    if [ -t 1 ] || ((elapsed >= shown + 10)); then
      n=$(compiled "$log")
      last=$(grep -v '[ :]' "$log" | tail -n 1 || true)
      # The service's own package is the last compiled: then go build links.
      [[ $last == */examples/$name ]] && last="linking"
      if [ -t 1 ]; then
        printf '\r\033[K==> building examples/%s: %d s, %s%s' "$name" "$elapsed" "$n" "${last:+ (${last})}"
      else
        say "building examples/$name: $elapsed s, $n${last:+ ($last)}"
      fi
      shown=$elapsed
    fi
    sleep 0.2
  done
  wait "$pid" || code=$?
  [ -t 1 ] && printf '\r\033[K'
  if ((code != 0)); then
    # The compiler's messages, without go build -v's package names.
    grep '[ :]' "$log" >&2 || cat "$log" >&2
    echo "run-examples: building examples/$name failed (go build exit status $code)" >&2
    exit 1
  fi
  say "built examples/$name in $((SECONDS - start)) s ($(compiled "$log")) -> $dir/bin/$name"
}
compiled() { # LOG -> "N packages compiled"
  local n
  n=$(grep -cv '[ :]' "$1" || true)
  if ((n == 1)); then echo "1 package compiled"; else echo "$n packages compiled"; fi
}
for name in billing orders gateway inventory; do build "$name"; done

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

run=$dir/run
rm -rf "$run"
mkdir -p "$run"
control=$run/control
mkfifo "$control"
echo $$ >"$run/supervisor.pid"

declare -A pid_of=() name_of=() stopping=()
reader=
stop() {
  trap - INT TERM
  say "stopping"
  [ -z "$reader" ] || kill -TERM "$reader" 2>/dev/null || true
  for pid in "${pid_of[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pid_of[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$run"
}
trap 'stop; exit 0' INT TERM

# A JFAST_<PLUGIN>_* variable for a plugin the service does not compile in is
# not an error: the boot ignores it with a WARNING naming it (environments are
# shared between services, and a sibling's variables are not this service's
# mistake). Each service gets only the variables of its own plugins, so its
# log holds no such warning.
without() { # PLUGIN... -> env -u arguments for their JFAST_<PLUGIN>_* variables
  local v p
  # This script's own variable is no service's.
  [ -z "${JFAST_EXAMPLES_DIR+set}" ] || printf -- '-u\nJFAST_EXAMPLES_DIR\n'
  for v in $(compgen -e); do
    for p in "$@"; do [[ $v == JFAST_${p}_* ]] && printf -- '-u\n%s\n' "$v"; done
  done
}
mapfile -t billing_unset < <(without CACHE HTTP QUEUE MAIL STORAGE TELEMETRY GATEWAY GRPC)
mapfile -t orders_unset < <(without IDEMPOTENCY TELEMETRY GATEWAY)
mapfile -t gateway_unset < <(without DB CACHE AUTH QUEUE MAIL STORAGE IDEMPOTENCY CHANNELS TELEMETRY APP GRPC)
mapfile -t inventory_unset < <(without DB CACHE HTTP AUTH QUEUE MAIL STORAGE IDEMPOTENCY CHANNELS TELEMETRY GATEWAY APP)

# launch NAME starts one service; its log lines are prefixed with its name
# ($! is the service itself, not the sed). The sed ignores SIGINT: Ctrl-C
# reaches the whole process group, and a sed that died of it would lose the
# service's shutdown lines and break the pipe the service still writes to.
launch() {
  case $1 in
  billing)
    env "${billing_unset[@]}" JFAST_CONFIG="$billing_config" JFAST_APP_ADMIN_LISTEN=127.0.0.1:9010 "$dir/bin/billing" > >(trap '' INT; exec sed -u 's/^/billing | /') 2>&1 &
    ;;
  orders)
    local receipts=()
    if [ "$dir" != /tmp/jfast-examples ]; then # the root in examples/orders/jfast.toml
      receipts=(JFAST_STORAGE_DISKS__RECEIPTS__ROOT="$dir/receipts")
    fi
    env "${orders_unset[@]}" JFAST_CONFIG="$orders_config" JFAST_APP_ADMIN_LISTEN=127.0.0.1:9000 "${receipts[@]}" "$dir/bin/orders" > >(trap '' INT; exec sed -u 's/^/orders  | /') 2>&1 &
    ;;
  gateway)
    # The gateway keeps its own listen address: JFAST_APP_* is the other two's.
    env "${gateway_unset[@]}" JFAST_CONFIG=examples/gateway/jfast.toml JFAST_APP_ADMIN_LISTEN=127.0.0.1:9090 "$dir/bin/gateway" > >(trap '' INT; exec sed -u 's/^/gateway | /') 2>&1 &
    ;;
  inventory)
    # Inventory keeps its own addresses too; orders finds it at 127.0.0.1:9020
    # (JFAST_GRPC_UPSTREAMS__INVENTORY__TARGET elsewhere).
    env "${inventory_unset[@]}" JFAST_CONFIG=examples/inventory/jfast.toml JFAST_APP_ADMIN_LISTEN=127.0.0.1:9030 "$dir/bin/inventory" > >(trap '' INT; exec sed -u 's/^/invent. | /') 2>&1 &
    ;;
  *) return 1 ;;
  esac
  pid_of[$1]=$!
  name_of[$!]=$1
  unset "stopping[$1]"
  echo $! >"$run/$1.pid"
}
for name in billing orders gateway inventory; do launch "$name"; done

for addr in 127.0.0.1:8010 127.0.0.1:8000 127.0.0.1:8090 127.0.0.1:9020; do
  for ((i = 0; i < 150; i++)); do
    port_open "${addr%:*}" "${addr#*:}" && break
    sleep 0.1
  done
done
say "billing on http://127.0.0.1:8010, orders on http://127.0.0.1:8000, the gateway in front of both on http://127.0.0.1:8090, inventory (gRPC) on 127.0.0.1:9020 (Ctrl-C stops them all)"
say "status pages: http://127.0.0.1:9000/status (orders), :9010/status (billing), :9030/status (inventory), :9090/status (gateway)"
say "try: TOKEN=\$($dir/bin/orders token ada); curl -s localhost:8090/api/orders/1 -H \"Authorization: Bearer \$TOKEN\""
say "an outage: bash scripts/example.sh stop billing; curl -s localhost:9000/ready; bash scripts/example.sh start billing"

# listen reads one line from the FIFO in the background (scripts/example.sh
# writes "stop NAME" or "start NAME"); the loop below waits for it as for
# any service.
listen() {
  (IFS= read -r line <"$control" && printf '%s\n' "$line" >"$run/command") &
  reader=$!
}
# obey does what scripts/example.sh asked for.
obey() {
  local verb name
  read -r verb name <"$run/command" || return 0
  [[ $name =~ ^(billing|orders|gateway|inventory)$ ]] || return 0
  case $verb in
  stop)
    if [ -n "${pid_of[$name]:-}" ]; then
      say "stopping $name (scripts/example.sh start $name starts it again)"
      stopping[$name]=1
      kill -TERM "${pid_of[$name]}" 2>/dev/null || true
    fi
    ;;
  start)
    if [ -z "${pid_of[$name]:-}" ]; then
      say "starting $name again"
      launch "$name" || say "no service named '$name'"
    fi
    ;;
  esac
}

# A service that exits (a configuration error, a failed migration, or stopped
# on purpose to watch the others cope) is reported; the others keep serving
# until Ctrl-C. A service exits with status 0 only after a clean stop, which
# a signal asked for: Ctrl-C reaches the services too, and when this script
# cannot trap it (started with SIGINT ignored, as a background job of a
# non-interactive shell is) they stop on their own, so status 0 is reported as
# a stop. When every service has exited on its own, so does this script.
status=0
listen
while :; do
  live=("${pid_of[@]}")
  if ((${#live[@]} == 0 && ${#stopping[@]} == 0)); then break; fi
  code=0 exited=
  wait -n -p exited "${live[@]}" "$reader" || code=$?
  [ -n "$exited" ] || break
  if [ "$exited" = "$reader" ]; then
    obey
    listen
    continue
  fi
  name=${name_of[$exited]}
  unset "pid_of[$name]" "name_of[$exited]"
  rm -f "$run/$name.pid"
  if [ -n "${stopping[$name]:-}" ] || ((code == 0)); then
    say "$name stopped"
    continue
  fi
  say "$name exited with status $code"
  status=$code
done
kill -TERM "$reader" 2>/dev/null || true
rm -rf "$run"
exit "$status"
