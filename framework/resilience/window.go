package resilience

import "time"

// window counts two quantities (a and b) over a sliding span of time split
// into equal buckets. The span summed at any moment covers between
// span-width and span of history, so counts are exact to within one bucket.
// Times are durations since an origin the owner chose. It is not safe for
// concurrent use; its owner holds a lock.
type window struct {
	width   time.Duration // one bucket
	head    int64         // epoch (time / width) of the newest bucket
	headEnd time.Duration // end of the newest bucket: below it, no division
	idx     int           // head % len(buckets)
	buckets []bucket
	a, b    int64 // running totals over the buckets
}

type bucket struct{ a, b int64 }

// newWindow returns a window of span split into n buckets.
func newWindow(span time.Duration, n int) window {
	w := span / time.Duration(n)
	if w <= 0 {
		w = 1
	}
	return window{width: w, headEnd: w, buckets: make([]bucket, n)}
}

// advance drops the buckets that have slid out of the span at now.
func (w *window) advance(now time.Duration) {
	if now < w.headEnd {
		return // still in the newest bucket (or a clock that stepped back)
	}
	e := int64(now / w.width)
	n := int64(len(w.buckets))
	if e-w.head >= n {
		clear(w.buckets)
		w.a, w.b = 0, 0
		w.idx = int(e % n)
	} else {
		for k := w.head + 1; k <= e; k++ {
			w.idx++
			if w.idx == len(w.buckets) {
				w.idx = 0
			}
			bk := &w.buckets[w.idx]
			w.a -= bk.a
			w.b -= bk.b
			*bk = bucket{}
		}
	}
	w.head = e
	w.headEnd = time.Duration(e+1) * w.width
}

// add records da and db in the bucket of now. A time before the newest
// bucket (a clock that stepped back) counts in the newest bucket.
func (w *window) add(now time.Duration, da, db int64) {
	w.advance(now)
	bk := &w.buckets[w.idx]
	bk.a += da
	bk.b += db
	w.a += da
	w.b += db
}

// sub takes da and db back from the bucket of at, an earlier add's time,
// while that bucket is still in the span; once it has slid out (or when
// it holds less, as when the add counted in a newer bucket) nothing is
// taken.
func (w *window) sub(at time.Duration, da, db int64) {
	back := w.head - int64(at/w.width)
	n := int64(len(w.buckets))
	if back < 0 || back >= n {
		return
	}
	bk := &w.buckets[(int64(w.idx)-back+n)%n]
	if bk.a < da || bk.b < db {
		return
	}
	bk.a -= da
	bk.b -= db
	w.a -= da
	w.b -= db
}

// reset forgets everything.
func (w *window) reset() {
	clear(w.buckets)
	w.a, w.b = 0, 0
}
