package channels

import (
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
)

// Bad configuration refuses to boot, naming the full key and the fix.
func TestConfigRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, toml, want string
	}{
		{"bad name", `broadcast = ["a:b"]`, `plugin.channels.broadcast: channel "a:b" must be letters`},
		{"in both", "broadcast = [\"x\"]\ndurable = [\"x\"]", `plugin.channels.durable: channel "x" is listed in both broadcast and durable; fix: choose one delivery`},
		{"twice", `durable = ["x", "x"]`, `plugin.channels.durable: channel "x" is listed twice`},
		{"visibility", "handler_timeout = \"30s\"\nvisibility_timeout = \"30s\"", "plugin.channels.visibility_timeout: must be longer than handler_timeout (30s), got 30s; fix: raise visibility_timeout"},
		{"zero timeout", `handler_timeout = "0s"`, "plugin.channels.handler_timeout: must be a positive duration"},
		{"payload", `max_payload_bytes = 0`, "plugin.channels.max_payload_bytes: must be greater than zero"},
		{"deliveries", `max_deliveries = -1`, "plugin.channels.max_deliveries: must be greater than zero"},
		{"sse pending", `sse_max_pending_bytes = 0`, "plugin.channels.sse_max_pending_bytes: must be greater than zero"},
		{"sse streams", `sse_max_streams = 0`, "plugin.channels.sse_max_streams: must be greater than zero"},
		{"sse per client", `sse_max_streams_per_client = -1`, "plugin.channels.sse_max_streams_per_client: must be greater than zero"},
		{"sse per client over", "sse_max_streams = 10\nsse_max_streams_per_client = 11", "plugin.channels.sse_max_streams_per_client: must not be more than sse_max_streams (10), got 11; fix: lower"},
		{"sse buffer gone", `sse_buffer = 64`, "sse_buffer"},
		{"empty group", `group = ""`, "plugin.channels.group: must not be empty"},
		{"unknown key", `durabel = ["x"]`, "durabel"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := jfasttest.New(t, jfasttest.Options{
				TOML:    "[plugins]\nenabled = [\"cache\", \"channels\"]\n[plugin.channels]\n" + tc.toml,
				Plugins: []framework.Plugin{cache.New(), New()},
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// The channels plugin needs the cache plugin.
func TestNeedsCache(t *testing.T) {
	t.Parallel()
	_, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"channels\"]\n",
		Plugins: []framework.Plugin{cache.New(), New()},
	})
	if err == nil || !strings.Contains(err.Error(), "cache") {
		t.Fatalf("error = %v", err)
	}
}

// The defaults are the documented ones, and key_prefix and group follow
// app.name.
func TestDefaults(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"cache\", \"channels\"]\n",
		Plugins: []framework.Plugin{cache.New(), New()},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := app.Plugin("channels").(*Plugin)
	want := defaultConfig()
	want.KeyPrefix, want.Group = "orders:channels:", "orders"
	got := p.cfg
	if got.KeyPrefix != want.KeyPrefix || got.Group != want.Group || got.MaxPayloadBytes != 65536 ||
		got.HandlerTimeout != want.HandlerTimeout || got.VisibilityTimeout != want.VisibilityTimeout ||
		got.MaxDeliveries != 5 || got.MaxLen != 10000 || got.HealthCheckInterval != want.HealthCheckInterval ||
		got.BroadcastBuffer != 1024 || got.SSEMaxPendingBytes != 8<<20 || got.SSEMaxStreams != 10000 || got.SSEMaxStreamsPerClient != 64 || got.SSEHeartbeat != want.SSEHeartbeat ||
		got.SSEWriteTimeout != want.SSEWriteTimeout || got.SSERetry != want.SSERetry {
		t.Fatalf("config = %+v", got)
	}
}
