package cache

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkGet compares a GET through the plugin (key prefix, breaker, deadline
// context, error classification) with the same GET on a bare go-redis client,
// against the same Redis in the same run. docs/performance.md has the figures.
//
//	go test -run '^$' -bench BenchmarkGet -count 6 ./plugins/cache/
func BenchmarkGet(b *testing.B) {
	bd := setup(b, setupOpts{})
	ctx := context.Background()
	value := bytes.Repeat([]byte("x"), 100)
	if err := bd.cache.Set(ctx, "bench", value, time.Hour); err != nil {
		b.Fatal(err)
	}
	bare := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", PoolSize: bd.cache.cfg.PoolSize})
	b.Cleanup(func() { _ = bare.Close() })
	full := bd.cache.Key("bench")

	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v, err := bare.Get(ctx, full).Bytes(); err != nil || len(v) != 100 {
				b.Fatal(err)
			}
		}
	})
	b.Run("plugin", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v, ok, err := bd.cache.Get(ctx, "bench"); err != nil || !ok || len(v) != 100 {
				b.Fatal(err)
			}
		}
	})
	b.Run("bare-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if v, err := bare.Get(ctx, full).Bytes(); err != nil || len(v) != 100 {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("plugin-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if v, ok, err := bd.cache.Get(ctx, "bench"); err != nil || !ok || len(v) != 100 {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkGetInterleaved runs the bare and the plugin GET alternately, one of
// each per iteration (in alternating order), and reports both averages and the
// overhead. On a loaded machine this A/B in one loop is far steadier than two
// sub-benchmarks run one after the other, since any load hits both alike.
func BenchmarkGetInterleaved(b *testing.B) {
	bd := setup(b, setupOpts{})
	ctx := context.Background()
	if err := bd.cache.Set(ctx, "bench", bytes.Repeat([]byte("x"), 100), time.Hour); err != nil {
		b.Fatal(err)
	}
	bare := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", PoolSize: bd.cache.cfg.PoolSize})
	b.Cleanup(func() { _ = bare.Close() })
	full := bd.cache.Key("bench")
	viaBare := func() {
		if v, err := bare.Get(ctx, full).Bytes(); err != nil || len(v) != 100 {
			b.Fatal(err)
		}
	}
	viaPlugin := func() {
		if v, ok, err := bd.cache.Get(ctx, "bench"); err != nil || !ok || len(v) != 100 {
			b.Fatal(err)
		}
	}
	viaBare()
	viaPlugin()
	var bareNs, pluginNs []time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			bareNs = append(bareNs, elapsed(viaBare))
			pluginNs = append(pluginNs, elapsed(viaPlugin))
		} else {
			pluginNs = append(pluginNs, elapsed(viaPlugin))
			bareNs = append(bareNs, elapsed(viaBare))
		}
		i++
	}
	// Medians: a load spike from another process lands on a few samples of
	// either side and does not move them.
	bm, pm := median(bareNs), median(pluginNs)
	b.ReportMetric(float64(bm.Nanoseconds()), "bare-median-ns")
	b.ReportMetric(float64(pm.Nanoseconds()), "plugin-median-ns")
	b.ReportMetric(100*(float64(pm)/float64(bm)-1), "overhead-%")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkHook is the plugin's own cost per command without the network: the
// hook around a command that returns at once.
func BenchmarkHook(b *testing.B) {
	m, _ := newCommandMetrics()
	h := &hook{timeout: time.Second, breaker: New().testBreaker(), metrics: &m}
	next := h.ProcessHook(func(context.Context, redis.Cmder) error { return nil })
	ctx := context.Background()
	cmd := redis.NewStringCmd(ctx, "get", "k")
	b.ReportAllocs()
	for b.Loop() {
		_ = next(ctx, cmd)
	}
}
