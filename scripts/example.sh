#!/usr/bin/env bash
# Stops or starts one of the services `make run` (scripts/run-examples.sh)
# runs, while it runs, to watch the others cope with an outage and recover:
#
#   bash scripts/example.sh stop billing     # orders' calls to billing now fail
#   bash scripts/example.sh start billing    # billing again, with its admin listener
#   bash scripts/example.sh status           # which services run, with their pids
#
# NAME is billing, orders, gateway or inventory. make run's script does the
# work (it is asked through a FIFO in $JFAST_EXAMPLES_DIR/run), so a service
# started again is started as it was at first (configuration, environment,
# admin listener), its log lines go to make run's terminal, and Ctrl-C there
# stops it with the others. This script waits until the service has stopped
# (its ports closed) or started (its ports answer), at most 60 s.
set -euo pipefail
dir=${JFAST_EXAMPLES_DIR:-/tmp/jfast-examples}
run=$dir/run

usage() {
  echo "usage: bash scripts/example.sh stop|start NAME, or status (NAME: billing, orders, gateway, inventory)" >&2
  exit 2
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The ports each service listens on under make run: its own, then its admin
# listener's.
declare -A ports=([billing]="8010 9010" [orders]="8000 9000" [gateway]="8090 9090" [inventory]="9020 8020 9030")
declare -A about=(
  [billing]="http://127.0.0.1:8010, admin listener http://127.0.0.1:9010 (/ready, /status, /metrics)"
  [orders]="http://127.0.0.1:8000, admin listener http://127.0.0.1:9000 (/ready, /status, /metrics)"
  [gateway]="http://127.0.0.1:8090, admin listener http://127.0.0.1:9090 (/ready with each route's breaker, /status)"
  [inventory]="gRPC 127.0.0.1:9020, HTTP 127.0.0.1:8020, admin listener http://127.0.0.1:9030 (/ready, /status)"
)

supervisor=$(cat "$run/supervisor.pid" 2>/dev/null || true)
if [ -z "$supervisor" ] || ! kill -0 "$supervisor" 2>/dev/null || [ ! -p "$run/control" ]; then
  echo "example.sh: make run is not running (no $run/supervisor.pid of a live process); start it first" >&2
  exit 1
fi

(($# >= 1)) || usage
if [ "$1" = status ]; then
  for name in billing orders gateway inventory; do
    if [ -f "$run/$name.pid" ]; then
      echo "$name: running (pid $(cat "$run/$name.pid")) on ${about[$name]}"
    else
      echo "$name: stopped (bash scripts/example.sh start $name)"
    fi
  done
  exit 0
fi
(($# == 2)) || usage
verb=$1 name=$2
[ -n "${ports[$name]:-}" ] || usage

# ask VERB NAME: one line to make run's script, given up after 5 s (the FIFO
# has no reader only if make run is stopping).
ask() { timeout 5 bash -c 'printf "%s\n" "$1" >"$2"' _ "$*" "$run/control"; }

case $verb in
stop)
  if [ ! -f "$run/$name.pid" ]; then
    echo "$name is not running"
    exit 0
  fi
  ask stop "$name"
  for ((i = 0; i < 600; i++)); do
    [ -f "$run/$name.pid" ] && sleep 0.1 && continue
    for p in ${ports[$name]}; do port_open "$p" && sleep 0.1 && continue 2; done
    echo "$name stopped: $(sed 's/,.*//; s/ (.*//' <<<"${about[$name]}") and its admin listener are closed; bash scripts/example.sh start $name brings it back"
    exit 0
  done
  echo "example.sh: $name did not stop within 60 s; see make run's terminal" >&2
  exit 1
  ;;
start)
  if [ -f "$run/$name.pid" ]; then
    echo "$name is already running (pid $(cat "$run/$name.pid"))"
    exit 0
  fi
  ask start "$name"
  for ((i = 0; i < 600; i++)); do
    pid=$(cat "$run/$name.pid" 2>/dev/null || true)
    if [ -n "$pid" ]; then
      up=1
      for p in ${ports[$name]}; do port_open "$p" || up=; done
      if [ -n "$up" ]; then
        echo "$name started (pid $pid): ${about[$name]}"
        exit 0
      fi
    elif ((i > 50)); then
      echo "example.sh: $name exited while starting; its log is in make run's terminal" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "example.sh: $name did not answer within 60 s; see make run's terminal" >&2
  exit 1
  ;;
*) usage ;;
esac
