package channels

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// interleave runs bare and plugin alternately, one of each per iteration (in
// alternating order), and reports both medians and the plugin's overhead. On
// a loaded machine this A/B in one loop is far steadier than two
// sub-benchmarks run one after the other: any load hits both alike.
func interleave(b *testing.B, bare, plugin func()) {
	bare()
	plugin()
	var bareNs, pluginNs []time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			bareNs = append(bareNs, elapsed(bare))
			pluginNs = append(pluginNs, elapsed(plugin))
		} else {
			pluginNs = append(pluginNs, elapsed(plugin))
			bareNs = append(bareNs, elapsed(bare))
		}
		i++
	}
	bm, pm := median(bareNs), median(pluginNs)
	b.ReportMetric(float64(bm.Nanoseconds()), "bare-median-ns")
	b.ReportMetric(float64(pm.Nanoseconds()), "plugin-median-ns")
	b.ReportMetric(float64(pm)/float64(bm), "ratio")
}

// BenchmarkPublishInterleaved compares Publish through the plugin (channel
// lookup, size check, request ID, the broadcast frame or the stream fields,
// the cache plugin's breaker and deadline, the metric) with the same command
// on a bare go-redis client, against the machine's Redis in the same run: a
// PUBLISH of a 100-byte payload, and an XADD of it with the same MAXLEN ~.
// docs/performance.md has the figures.
//
//	go test -run '^$' -bench PublishInterleaved -benchtime 20000x -count 6 ./plugins/channels/
func BenchmarkPublishInterleaved(b *testing.B) {
	cl := newCluster(b, "", `broadcast = ["news"]`+"\n"+`durable = ["orders"]`)
	rep := cl.start(nil)
	ch := rep.ch
	bare := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", PoolSize: 20})
	b.Cleanup(func() { _ = bare.Close() })
	ctx := context.Background()
	payload := []byte(strings.Repeat("x", 100))
	b.Run("publish", func(b *testing.B) {
		key := cl.prefix + "news"
		interleave(b,
			func() {
				if err := bare.Publish(ctx, key, payload).Err(); err != nil {
					b.Fatal(err)
				}
			},
			func() {
				if err := ch.Publish(ctx, "news", payload); err != nil {
					b.Fatal(err)
				}
			})
	})
	b.Run("xadd", func(b *testing.B) {
		bareKey := cl.prefix + "bare-orders"
		interleave(b,
			func() {
				if err := bare.XAdd(ctx, &redis.XAddArgs{Stream: bareKey, MaxLen: DefaultMaxLen, Approx: true, Values: []any{"payload", payload}}).Err(); err != nil {
					b.Fatal(err)
				}
			},
			func() {
				if err := ch.Publish(ctx, "orders", payload); err != nil {
					b.Fatal(err)
				}
			})
	})
}

// BenchmarkSSEFanOut measures how long an event takes from Publish on one
// replica to each of 1,000 server-sent events clients of another replica
// (pub/sub to the second replica, its hub, 1,000 HTTP responses, the
// clients' reads, all on this machine), and reports p50 and p99 over every
// client and event. Events are published 50 ms apart, so each one's fan-out
// is measured alone.
//
//	go test -run '^$' -bench SSEFanOut -benchtime 40x ./plugins/channels/
//
// The "bare" case is the floor: the same 1,000 clients and measurement on a
// plain net/http handler fed from a Go channel in the same process (no Redis,
// no second replica, no jfast), so the figures say what the plugin adds to
// the cost of 1,000 HTTP streams on this machine.
func BenchmarkSSEFanOut(b *testing.B) {
	b.Run("bare", func(b *testing.B) { fanOutBare(b, 1000) })
	for _, channel := range []string{"news", "orders"} {
		b.Run(channel, func(b *testing.B) { fanOut(b, channel, 1000) })
	}
}

func fanOut(b *testing.B, channel string, clients int) {
	cl := newCluster(b, "", "broadcast = [\"news\"]\ndurable = [\"orders\"]\nsse_max_streams_per_client = 10000")
	pub := cl.start(nil)
	srv := cl.start(sseRoutes(SSEOpts{}, channel))
	measureFanOut(b, srv.svc.URL+"/events/"+channel, clients, func() {
		subscribed(b, srv.ch)
		if n := srv.ch.metrics.sseClientsNow(); n != clients {
			b.Fatalf("%d streams open, want %d", n, clients)
		}
	}, func(data []byte) {
		if err := pub.ch.Publish(context.Background(), channel, data); err != nil {
			b.Fatal(err)
		}
	})
}

// fanOutBare is the floor: a plain SSE handler, each stream fed by a Go
// channel of its own, every event sent to every channel.
func fanOutBare(b *testing.B, clients int) {
	var mu sync.Mutex
	streams := map[chan []byte]struct{}{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch := make(chan []byte, 64)
		mu.Lock()
		streams[ch] = struct{}{}
		mu.Unlock()
		defer func() {
			mu.Lock()
			delete(streams, ch)
			mu.Unlock()
		}()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = w.Write([]byte("retry: 2000\n\n"))
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case data := <-ch:
				if _, err := w.Write(append(append([]byte("data: "), data...), '\n', '\n')); err != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
			}
		}
	}))
	b.Cleanup(srv.Close)
	measureFanOut(b, srv.URL, clients, func() {}, func(data []byte) {
		mu.Lock()
		defer mu.Unlock()
		for ch := range streams {
			select {
			case ch <- data:
			default:
			}
		}
	})
}

// measureFanOut opens clients streams on url, calls ready once they all
// are open, then publishes one timestamped event per iteration, 50 ms apart,
// and reports the latencies from publish to each client's read.
func measureFanOut(b *testing.B, url string, clients int, ready func(), publish func([]byte)) {
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: clients, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	opened := make(chan struct{}, clients)
	ctx, cancel := context.WithCancel(context.Background())
	for range clients {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			first := true
			for sc.Scan() {
				if first {
					opened <- struct{}{}
					first = false
				}
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				sent, err := strconv.ParseInt(data, 10, 64)
				if err != nil {
					continue
				}
				d := time.Since(time.Unix(0, sent))
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	for range clients {
		<-opened
	}
	ready()
	want := 0
	for b.Loop() {
		publish([]byte(strconv.FormatInt(time.Now().UnixNano(), 10)))
		want += clients
		time.Sleep(50 * time.Millisecond)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	mu.Lock()
	sorted := slices.Clone(lat)
	mu.Unlock()
	slices.Sort(sorted)
	if len(sorted) < want {
		b.Errorf("%d deliveries of %d", len(sorted), want)
	}
	b.ReportMetric(float64(percentile(sorted, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(sorted, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(percentile(sorted, 1).Microseconds()), "max-µs")
	b.ReportMetric(float64(clients), "clients")
}
