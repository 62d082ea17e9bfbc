#!/bin/sh
# Runs the resilience comparison benchmarks COUNT times (default 5) in one
# process and prints the markdown table of docs/performance.md: best and
# median ns/op, allocs/op, and each implementation's time relative to jfast's
# (by the best runs: on a shared machine noise only ever adds time).
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
	n[key]++; v[key, n[key]] = $3; allocs[key] = $7
	if (!(p[1] in seen)) { seen[p[1]] = 1; order[++nb] = p[1] }
	if (!((p[1], p[2]) in seenImpl)) { seenImpl[p[1], p[2]] = 1; impls[p[1], ++ni[p[1]]] = p[2] }
}
function sorted(key, a,    i, j, t, m) {
	m = n[key]
	for (i = 1; i <= m; i++) a[i] = v[key, i] + 0
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return m
}
function median(key,    a, m) {
	m = sorted(key, a)
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
function best(key,    a) {
	sorted(key, a)
	return a[1]
}
END {
	print "| benchmark | implementation | ns/op, best of " n[order[1], impls[order[1], 1]] " | ns/op, median | allocs/op | time vs jfast |"
	print "|---|---|---:|---:|---:|---:|"
	for (b = 1; b <= nb; b++) {
		bn = order[b]; base = best(bn SUBSEP "jfast")
		for (i = 1; i <= ni[bn]; i++) {
			im = impls[bn, i]; k = bn SUBSEP im
			printf "| %s | %s | %.1f | %.1f | %s | %.1f× |\n", substr(bn, 10), im, best(k), median(k), allocs[bn, im], best(k) / base
		}
	}
}'
