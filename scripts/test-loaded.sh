#!/usr/bin/env bash
# make test-loaded: the suite on a busy machine. A busy loop runs on every core
# (one bash `while :; do :; done` per core, at the tests' own priority, as a
# build beside the tests would) while `make test` runs LOADED_RUNS times in a
# row (3 by default); the first failure stops it. A test that passes only on
# an idle machine fails here. With LOADED_PKGS set, `go test $TEST_FLAGS` runs
# on those packages instead of make test (CI's loaded pass, see the Makefile).
# The busy loops are stopped by their pids when the script ends, however it
# ends. Usage:
#   make test-loaded
#   make test-loaded LOADED_RUNS=1 LOADED_PKGS='./plugins/http/ ./plugins/queue/'
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${LOADED_RUNS:-3}
cores=$(nproc)
hogs=()
stop() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
  wait "${hogs[@]}" 2>/dev/null || true
}
trap stop EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < cores; i++)); do
  (while :; do :; done) &
  hogs+=("$!")
done
echo "test-loaded: $cores busy loops (pids ${hogs[*]}), one per core"
start=$SECONDS
for ((r = 1; r <= runs; r++)); do
  echo "test-loaded: run $r of $runs"
  if [ -n "${LOADED_PKGS:-}" ]; then
    # shellcheck disable=SC2086 # flags and packages are lists
    ${GO:-go} test ${TEST_FLAGS:--race -count=1 -p 2 -timeout 15m} $LOADED_PKGS
  else
    ${MAKE:-make} test
  fi
done
echo "test-loaded: $runs runs passed under load in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
