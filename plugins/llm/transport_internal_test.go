package llm

import (
	"net/http"
	"testing"
)

// The transport never takes a proxy from the environment (HTTP_PROXY,
// HTTPS_PROXY): it would see every request with its API key. Only the
// proxy key names one.
func TestTransportProxy(t *testing.T) {
	t.Parallel()
	cfg := ProviderConfig{Name: "p", BaseURL: "https://api.example.com/v1", Model: "m"}.withDefaults()
	if tr := newTransport(cfg); tr.Proxy != nil {
		t.Errorf("without the proxy key the transport has a Proxy func: the environment's would be used")
	}
	cfg.Proxy = "http://user:pw@proxy.internal:3128"
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat/completions", nil)
	u, err := newTransport(cfg).Proxy(req)
	if err != nil || u == nil || u.Host != "proxy.internal:3128" {
		t.Errorf("with proxy set: %v, %v; want proxy.internal:3128", u, err)
	}
}
