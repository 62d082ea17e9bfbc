package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestTraceContinuesTheCallersTrace(t *testing.T) {
	t.Parallel()
	// A collector that accepts every export, so the test needs none running.
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(collector.Close)
	svc := setup(t, map[string]string{"JFAST_TELEMETRY_ENDPOINT": collector.URL})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	resp := svc.Get(t, "/trace", "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.Status, resp)
	}
	var got struct {
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	}
	if err := json.Unmarshal(resp.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.TraceID != traceID || got.SpanID == "00f067aa0ba902b7" || got.SpanID == "0000000000000000" {
		t.Fatalf("the request's span %+v does not continue trace %s as a new span", got, traceID)
	}
}
