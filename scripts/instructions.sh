#!/usr/bin/env bash
# make instructions: the instructions per call of the http client and the
# gateway against their baselines, counted by valgrind's callgrind instead of
# timed (docs/performance.md, "Counting instructions instead of time"). A count
# is the same on a busy machine as on a quiet one; it leaves out the kernel's
# work (the system calls, the same in both ways of each pair) and the cost of
# memory and caches, so it tells where the code's own work goes, not the time.
#
# Each way runs as one sub-benchmark on one P, twice: N calls and 2N calls;
# the difference is N calls' worth, without the start-up. The runtime's
# asynchronous preemption is off (GODEBUG=asyncpreemptoff=1): callgrind fails
# an assertion on the signal it uses. RDTSCP is off too (GODEBUG=cpu.rdtscp=off): the
# runtime reads the CPU's clock with it where the host has it, and valgrind 3.19
# stops on it as an illegal instruction (golang.org/x/sys/cpu, which reads the same
# GODEBUG, says it does not know the name; the runtime does). Usage:
#   make instructions              # N=5000
#   make instructions N=10000
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-5000}
if ! command -v valgrind >/dev/null; then
  echo "instructions: valgrind is not installed (apt-get install valgrind)" >&2
  exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# count PKG BENCH WAY: instructions per call of sub-benchmark BENCH/WAY of PKG.
count() {
  local bin=$dir/$(basename "$1").test refs=()
  [ -x "$bin" ] || go test -c -o "$bin" "./$1/"
  for calls in "$n" $((2 * n)); do
    GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
      "$bin" -test.run '^$' -test.bench "^$2\$/^$3\$" -test.benchtime "${calls}x" \
      >/dev/null 2>"$dir/log" || { cat "$dir/log" >&2; return 1; }
    refs+=("$(sed -n 's/.*I *refs: *//p' "$dir/log" | tr -d ,)")
  done
  echo $(((refs[1] - refs[0]) / n))
}

ratio() {
  awk -v b="$2" -v w="$3" -v name="$1" 'BEGIN { printf "%-44s %8d / %8d = %.3f\n", name, w, b, w / b }'
}

bare=$(count plugins/http BenchmarkGet bare-net-http)
client=$(count plugins/http BenchmarkGet jfast-client)
careful=$(count plugins/gateway BenchmarkProxy bare-pooled)
inapp=$(count plugins/gateway BenchmarkProxy pooled-in-app)
gateway=$(count plugins/gateway BenchmarkProxy gateway)
echo "instructions per call, $n and $((2 * n)) calls:"
ratio "http client / bare net/http" "$bare" "$client"
ratio "gateway / careful ReverseProxy" "$careful" "$gateway"
ratio "careful proxy in an App / careful" "$careful" "$inapp"
ratio "gateway / careful proxy in an App" "$inapp" "$gateway"
