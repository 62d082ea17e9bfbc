package idempotency

import (
	"net/http"
	"strconv"
	"testing"
)

// BenchmarkGuardedPost is the cost of the middleware on one request over a
// loopback socket: a POST without a key (the middleware passes it through),
// a first request with a new key (claim + store the response: two store round
// trips), and a replay (one store round trip), on each store.
//
//	go test -run '^$' -bench GuardedPost -benchtime 2000x ./plugins/idempotency/
func BenchmarkGuardedPost(b *testing.B) {
	for _, store := range stores {
		bb := setup(b, setupOpts{store: store})
		b.Run(store+"/no_key", func(b *testing.B) {
			for range b.N {
				if r := bb.post(b, "/orders/1", "-", `{"amount":10}`); r.Status != http.StatusOK {
					b.Fatal(r.Status)
				}
			}
		})
		b.Run(store+"/first", func(b *testing.B) {
			run := suffix() // keys unique across -count runs too
			for i := range b.N {
				r := bb.post(b, "/orders/1", "bench-"+run+"-"+strconv.Itoa(i), `{"amount":10}`)
				if r.Status != http.StatusOK || r.Header.Get(HeaderReplayed) != "" {
					b.Fatal(r.Status)
				}
			}
		})
		b.Run(store+"/replay", func(b *testing.B) {
			key := "bench-replay-" + suffix()
			bb.post(b, "/orders/1", key, `{"amount":10}`)
			b.ResetTimer()
			for range b.N {
				if r := bb.post(b, "/orders/1", key, `{"amount":10}`); r.Header.Get(HeaderReplayed) != "true" {
					b.Fatal(r.Status)
				}
			}
		})
	}
}
