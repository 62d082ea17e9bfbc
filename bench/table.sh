#!/bin/sh
# Runs the resilience comparison benchmarks COUNT times (default 5) in one
# process and prints the markdown table of docs/performance.md.
#
# Columns: best and median wall ns/op; best CPU ns/op of the benchmark's own
# thread (single-threaded benchmarks only: it leaves out the time the thread
# waited for a core on a busy machine); allocs/op; and each implementation's
# cost relative to jfast's, from CPU time where measured, else wall time.
# Usage: cd bench && ./table.sh [COUNT]
set -eu
count=${1:-5}
go test -c -o /tmp/jfast-bench.test . >/dev/null
/tmp/jfast-bench.test -test.run '^$' -test.bench . -test.benchmem -test.count "$count" |
awk '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	split(name, p, "/impl=")
	key = p[1] SUBSEP p[2]
	n[key]++
	for (f = 3; f <= NF; f++) {
		if ($f == "ns/op") wall[key, n[key]] = $(f - 1) + 0
		if ($f == "cpu-ns/op") cpu[key, n[key]] = $(f - 1) + 0
		if ($f == "allocs/op") allocs[key] = $(f - 1)
	}
	if (!(p[1] in seen)) { seen[p[1]] = 1; order[++nb] = p[1] }
	if (!((p[1], p[2]) in seenImpl)) { seenImpl[p[1], p[2]] = 1; impls[p[1], ++ni[p[1]]] = p[2] }
}
function sorted(arr, key, a,    i, j, t, m) {
	m = 0
	for (i = 1; i <= n[key]; i++) if ((key, i) in arr) a[++m] = arr[key, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return m
}
function median(arr, key,    a, m) {
	m = sorted(arr, key, a)
	if (m == 0) return -1
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
function best(arr, key,    a, m) {
	m = sorted(arr, key, a)
	return m ? a[1] : -1
}
function fmt(x) { return x < 0 ? "—" : sprintf("%.1f", x) }
END {
	print "| benchmark | implementation | wall ns/op, best of " n[order[1], impls[order[1], 1]] " | wall ns/op, median | CPU ns/op, best | allocs/op | cost vs jfast |"
	print "|---|---|---:|---:|---:|---:|---:|"
	for (b = 1; b <= nb; b++) {
		bn = order[b]; base = bn SUBSEP "jfast"
		usecpu = best(cpu, base) > 0
		for (i = 1; i <= ni[bn]; i++) {
			im = impls[bn, i]; k = bn SUBSEP im
			ratio = usecpu ? best(cpu, k) / best(cpu, base) : best(wall, k) / best(wall, base)
			printf "| %s | %s | %s | %s | %s | %s | %.1f× |\n", substr(bn, 10), im, fmt(best(wall, k)), fmt(median(wall, k)), fmt(best(cpu, k)), allocs[bn, im], ratio
		}
	}
}'
