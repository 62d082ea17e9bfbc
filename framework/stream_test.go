package framework_test

import (
	"bufio"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/requestid"
)

// A streaming response takes framework.StreamContext: it outlives
// request_timeout, keeps the request ID, and ends when the client goes away;
// App.Draining closes when Stop begins, so the stream ends before the drain.
func TestStreamContextAndDraining(t *testing.T) {
	type seen struct {
		deadline bool
		rid      string
		err      error
		how      string
	}
	got := make(chan seen, 2)
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: "[app]\nrequest_timeout = \"200ms\"\nshutdown_timeout = \"10s\"\n",
		Routes: func(app *framework.App, r chi.Router) error {
			r.Get("/stream", func(w http.ResponseWriter, r *http.Request) {
				ctx := framework.StreamContext(r)
				_, hasDeadline := ctx.Deadline()
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(200)
				_, _ = w.Write([]byte("open\n"))
				_ = http.NewResponseController(w).Flush()
				select {
				case <-ctx.Done():
					got <- seen{hasDeadline, requestid.FromContext(ctx), ctx.Err(), "client"}
				case <-app.Draining():
					got <- seen{hasDeadline, requestid.FromContext(ctx), ctx.Err(), "draining"}
				}
			})
			return nil
		},
	})
	open := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, svc.URL+"/stream", nil)
		req.Header.Set("X-Request-ID", "stream-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if l, _ := bufio.NewReader(resp.Body).ReadString('\n'); l != "open\n" {
			t.Fatalf("first line = %q", l)
		}
		return resp
	}

	// The client goes away after the request deadline has passed.
	resp := open()
	time.Sleep(400 * time.Millisecond)
	select {
	case s := <-got:
		t.Fatalf("the stream ended at the request deadline: %+v", s)
	default:
	}
	resp.Body.Close()
	s := <-got
	if s.how != "client" || s.deadline || s.rid != "stream-1" || s.err == nil {
		t.Fatalf("after the client left: %+v", s)
	}

	// Stop begins: Draining closes, the stream ends, the drain is quick.
	resp = open()
	defer resp.Body.Close()
	start := time.Now()
	if err := svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stop took %s with a stream open", d)
	}
	if s := <-got; s.how != "draining" {
		t.Fatalf("at stop: %+v", s)
	}
}
