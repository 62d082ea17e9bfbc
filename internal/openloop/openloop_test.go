package openloop_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jfastframework/jfast/internal/openloop"
)

// Every request of an open-loop load is sent and counted once, by outcome.
func TestRunCountsEveryRequest(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++ // one connection at a time below: the handler runs serially
		if n%2 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	c := openloop.NewClient()
	c.Transport.(*http.Transport).MaxConnsPerHost = 1
	defer c.CloseIdleConnections()
	res := openloop.Run(context.Background(), openloop.Load{URL: srv.URL, Rate: 200, Duration: 100 * time.Millisecond, Client: c, Objective: time.Hour})
	if res.Sent != 20 || res.OK != 10 || res.Shed != 10 || res.Failed != 0 || res.Good != 10 || len(res.Admitted) != 10 {
		t.Fatalf("result %+v, want 20 sent: 10 ok (all good), 10 shed", res)
	}
	if res.ShedFraction() != 0.5 {
		t.Fatalf("shed fraction %v", res.ShedFraction())
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {1, 1}} {
		if got := openloop.Percentile(ds, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if openloop.Percentile(nil, 50) != 0 {
		t.Error("percentile of nothing")
	}
}
