package overload_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jfastframework/jfast/bench/overload"
	"github.com/jfastframework/jfast/internal/openloop"
)

// Every arm serves the handler and /ready: a short light load gets only
// 200s. (The benchmark itself is the command in cmd/overload.)
func TestEveryArmServes(t *testing.T) {
	for _, arm := range overload.Arms {
		t.Run(arm, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- overload.Serve(ctx, arm, ln, overload.Work{CPU: 100 * time.Microsecond, Wait: time.Millisecond, GoZeroCPUThreshold: 900})
			}()
			base := "http://" + ln.Addr().String()
			waitServing(t, base+"/ready")
			res := openloop.Run(ctx, openloop.Load{URL: base + "/work", Rate: 100, Duration: 200 * time.Millisecond, Objective: time.Hour})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if res.Sent != 20 || res.OK != res.Sent {
				t.Fatalf("%+v: want 20 sent, all 200", res)
			}
		})
	}
}

// waitServing waits until url answers 200 (the jfast arm listens anew).
func waitServing(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 10s: %v", url, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
