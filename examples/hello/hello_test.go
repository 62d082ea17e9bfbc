package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/problem"
)

func TestHello(t *testing.T) {
	t.Parallel()
	svc := jfasttest.Start(t, jfasttest.Options{TOML: "[app]\nname = \"hello\"", Routes: Options().Routes})
	cases := []struct {
		path   string
		status int
		want   string
	}{
		{"/hello?name=ada", http.StatusOK, "hello, ada"},
		{"/hello", http.StatusOK, "hello, world"},
		{"/hello?name=" + strings.Repeat("x", 101), http.StatusUnprocessableEntity, "name is too long"},
	}
	for _, tc := range cases {
		r := svc.Get(t, tc.path)
		if r.Status != tc.status || !strings.Contains(r.String(), tc.want) {
			t.Errorf("GET %s = %d %s", tc.path, r.Status, r.Body)
		}
	}
	r := svc.Get(t, "/hello?name=ada")
	var g greeting
	if err := json.Unmarshal(r.Body, &g); err != nil || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("not JSON: %v %q", err, r.Header.Get("Content-Type"))
	}
	if r := svc.Do(t, http.MethodPost, "/hello", ""); r.Status != 405 || r.Header.Get("Content-Type") != problem.ContentType {
		t.Fatalf("POST /hello = %d %s", r.Status, r.Body)
	}
	if r := svc.Get(t, "/ready"); r.Status != 200 || !strings.Contains(r.String(), `"status":"ok"`) {
		t.Fatalf("/ready = %d %s", r.Status, r.Body)
	}
}
