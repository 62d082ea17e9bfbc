package llm

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Defaults of a provider. docs/llm.md gives the reason for each.
const (
	// DefaultConnectTimeout bounds the TCP connect and, separately, the TLS
	// handshake: a provider is across the internet, often in another
	// region, so it is the S3 disks' 5 s rather than the 2 s between
	// services of one network.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultReadGap is the longest silence a streamed call accepts: from
	// the request to the first byte, and then between two reads of the
	// stream. A model streaming tokens sends several a second; 30 s of
	// nothing is a stalled stream.
	DefaultReadGap = 30 * time.Second
	// DefaultTimeout bounds a whole call, every attempt and wait included:
	// a long answer from a large model takes a minute or more.
	DefaultTimeout = 120 * time.Second
	// DefaultBackoffBase and DefaultBackoffMax are the official OpenAI
	// SDKs' retry waits (0.5 s, doubling, at most 8 s): a provider's
	// overload lasts longer than a service's hiccup.
	DefaultBackoffBase = 500 * time.Millisecond
	DefaultBackoffMax  = 8 * time.Second
	// DefaultMaxRetryAfter is the longest rate-limit wait taken inside a
	// call, as the http client's max_retry_after.
	DefaultMaxRetryAfter = 30 * time.Second
	// DefaultRetryBudgetMinPerSecond is two, where the other clients have one:
	// model calls are few, and a lone call's two retries (its waits of at
	// most 0.5 s and 1 s) fall within one second, so with one the second
	// retry of a quiet service would always be refused.
	DefaultRetryBudgetMinPerSecond = 2.0
)

// Config is the [plugin.llm] table.
type Config struct {
	// Providers are the model providers this service calls, by name:
	// [plugin.llm.providers.<name>]. Defaults to none.
	Providers map[string]ProviderConfig `koanf:"providers"`
}

// ProviderConfig is one OpenAI-compatible provider (OpenAI, Azure OpenAI's
// compatible endpoint, vLLM, Ollama, LiteLLM, ...): the
// [plugin.llm.providers.<name>] table, or the argument of [NewClient]. In
// NewClient a zero field takes its default; in the configuration file a zero
// or negative deadline is an error.
type ProviderConfig struct {
	// Name names the provider in errors, metrics, traces and /ready. The
	// plugin sets it from the table's name. Defaults to "llm" in NewClient.
	Name string `koanf:"-"`

	// BaseURL is the API's base URL, the one the paths /chat/completions
	// are appended to, such as "https://api.openai.com/v1". It is a deploy
	// key: JFAST_LLM_PROVIDERS__<NAME>__BASE_URL wins over the file.
	// Required.
	BaseURL string `koanf:"base_url"`
	// APIKey is sent as "Authorization: Bearer <key>". It is a deploy key
	// and a secret: it never appears in logs, errors or `jfast config`.
	// Defaults to none (a local server that asks for no key).
	APIKey string `koanf:"api_key"`
	// Model is the model a call uses when it names none, and the only one a
	// call that falls back to this provider uses. Required.
	Model string `koanf:"model"`

	// Proxy is the URL of the proxy every request to the provider goes
	// through ("http://proxy.internal:3128", https or socks5 too). The
	// environment's HTTP_PROXY and HTTPS_PROXY are never used: a proxy sees
	// every request with its API key, so only one named here does. It is a
	// deploy key and a secret (it may carry credentials). Defaults to none.
	Proxy string `koanf:"proxy"`
	// AddressGuard refuses connections to addresses that are not globally
	// reachable (loopback, private, link-local, shared address space, ...)
	// and to this host's own, after DNS resolution: for a third-party
	// provider, a DNS answer pointing its name into this network cannot
	// send the API key there. Off, a model server on this network (vLLM,
	// Ollama on 127.0.0.1 or 10.x) is called as configured. Cannot be set
	// with proxy (the proxy resolves the provider's name). Defaults to
	// false.
	AddressGuard bool `koanf:"address_guard"`
	// AllowHosts are host names, addresses and networks ("10.1.0.0/16") the
	// address guard lets through. Defaults to none.
	AllowHosts []string `koanf:"allow_hosts"`

	// ConnectTimeout bounds the TCP connect, and separately the TLS
	// handshake. Defaults to 5s.
	ConnectTimeout time.Duration `koanf:"connect_timeout"`
	// ReadGap is the longest silence of a streamed call: from the request
	// to the first byte, then between two reads. A plain call has no gap
	// (its answer comes whole, when the model has finished) and only
	// timeout bounds it. Defaults to 30s.
	ReadGap time.Duration `koanf:"read_gap"`

	// MaxRetryAfter is the longest rate-limit wait (Retry-After or the
	// x-ratelimit-reset-* headers of a 429) a call takes before it tries
	// again; a longer one, or one the deadline cannot afford, goes back to
	// the caller at once. Defaults to 30s.
	MaxRetryAfter time.Duration `koanf:"max_retry_after"`
	// PolicyConfig is the attempts, timeout, backoff, retry budget,
	// bulkhead and breaker keys every plugin that calls out shares
	// (docs/resilience.md, "The policy keys"), with a provider's own
	// defaults: timeout 120s (for a stream, to its end), backoff_base 500ms and
	// backoff_max 8s (the official OpenAI SDKs' waits: a provider's overload
	// lasts longer than a service's hiccup) and retry_budget_min_per_second
	// 2. A call holds its bulkhead place for seconds to minutes, so
	// max_concurrent (50) fills far sooner than an http upstream's.
	resilience.PolicyConfig `koanf:",squash"`

	// Fallback names another provider that answers a call this one refuses
	// at once: its breaker is open, its bulkhead full, or its adaptive
	// throttle (throttle = true) drops the call. The fallback uses
	// its own model. Defaults to none.
	Fallback string `koanf:"fallback"`
}

// SetDefaults implements framework.Defaulter: each
// [plugin.llm.providers.<name>] starts from the defaults before the file and
// the environment apply.
func (p *ProviderConfig) SetDefaults() {
	*p = ProviderConfig{
		Name:           p.Name,
		BaseURL:        p.BaseURL,
		APIKey:         p.APIKey,
		Model:          p.Model,
		Fallback:       p.Fallback,
		ConnectTimeout: DefaultConnectTimeout,
		ReadGap:        DefaultReadGap,
		MaxRetryAfter:  DefaultMaxRetryAfter,
		PolicyConfig:   defaultPolicy(),
	}
}

// defaultPolicy returns the policy keys' defaults, with a provider's
// backoff and retry_budget_min_per_second.
func defaultPolicy() resilience.PolicyConfig {
	d := resilience.DefaultPolicyConfig()
	d.Timeout = DefaultTimeout
	d.BackoffBase, d.BackoffMax = DefaultBackoffBase, DefaultBackoffMax
	d.RetryBudgetMinPerSecond = DefaultRetryBudgetMinPerSecond
	return d
}

// withDefaults fills the zero fields of p, for NewClient.
func (p ProviderConfig) withDefaults() ProviderConfig {
	var d ProviderConfig
	d.SetDefaults()
	p.Name = cmp.Or(p.Name, "llm")
	p.ConnectTimeout = cmp.Or(p.ConnectTimeout, d.ConnectTimeout)
	p.ReadGap = cmp.Or(p.ReadGap, d.ReadGap)
	p.MaxRetryAfter = cmp.Or(p.MaxRetryAfter, d.MaxRetryAfter)
	p.PolicyConfig.FillZero(d.PolicyConfig)
	return p
}

// problems returns every problem with p's own settings (the fallback's name
// is checked against the other providers by the plugin).
func (p *ProviderConfig) problems() []framework.ConfigError {
	var l framework.Problems
	if problem := checkBaseURL(p.BaseURL); problem != "" {
		l.Error("base_url", problem, `set the API's base URL such as "https://api.openai.com/v1", in the file or in JFAST_LLM_PROVIDERS__<NAME>__BASE_URL`)
	}
	if strings.TrimSpace(p.Model) == "" {
		l.Error("model", "is missing", `set the model calls use when they name none, such as "gpt-4o-mini"`)
	}
	if strings.ContainsAny(p.APIKey, "\r\n") {
		// The key itself is never quoted: it is a secret.
		l.Error("api_key", "holds a line break", "remove it (a key read from a file often ends with one)")
	}
	if problem := checkProxy(p.Proxy); problem != "" {
		l.Error("proxy", problem, `set the proxy's URL such as "http://proxy.internal:3128", or remove it to connect directly`)
	}
	if p.AddressGuard && p.Proxy != "" {
		l.Error("address_guard", "cannot be set with proxy: the proxy resolves and connects to the provider's name, so the guard would only see the proxy's address",
			"remove one: restrict the proxy's own destinations, or connect directly with the guard")
	}
	for _, h := range p.AllowHosts {
		if !egress.ValidAllowHost(h) {
			l.Error("allow_hosts", fmt.Sprintf("%q is not a host name, an IP address or a network", h),
				`write a bare host such as "models.internal", an address such as "10.1.2.3" or a network such as "10.1.0.0/16", without a scheme or a port`)
		}
	}
	l.Deadline("connect_timeout", p.ConnectTimeout)
	l.Deadline("read_gap", p.ReadGap)
	if p.ReadGap > 0 && p.Timeout > 0 && p.ReadGap > p.Timeout {
		l.Error("read_gap", fmt.Sprintf("must not be above timeout (%s), got %s", p.Timeout, p.ReadGap),
			"lower read_gap or raise timeout: the gap could never fire")
	}
	l.Deadline("max_retry_after", p.MaxRetryAfter)
	p.PolicyConfig.ValidateUnhedged(&l, notHedged, notHedgedFix)
	return l
}

// notHedged and notHedgedFix are the words of the refusal of hedge_after
// and max_hedges.
const (
	notHedged    = "an llm call is not hedged: a second completion costs its tokens again and may answer differently"
	notHedgedFix = "remove it; timeout, read_gap and attempts bound a slow provider"
)

// refuseHedgingKeys refuses hedge_after and max_hedges when the file or the
// environment set them (v is the provider's table), whatever their value.
// The provider's problems see only values, and a max_hedges = 1 or a
// hedge_after = "" equals the default: it would pass, and read as if the
// key did something. Only a key the value test let through is reported
// here, so none is reported twice.
func refuseHedgingKeys(v *framework.Validation, p ProviderConfig) {
	if v.IsSet("hedge_after") && p.HedgeAfter == "" {
		v.Error("hedge_after", notHedged, notHedgedFix)
	}
	if v.IsSet("max_hedges") && p.MaxHedges == resilience.DefaultMaxHedges {
		v.Error("max_hedges", notHedged, "remove it")
	}
}

// Applies implements framework.ConditionalKeys: hedge_after and max_hedges
// are refused whenever they are set, so the config command and jfast new
// leave them out of a provider's table.
func (p ProviderConfig) Applies(key string) bool {
	return key != "hedge_after" && key != "max_hedges"
}

// checkBaseURL returns what is wrong with a provider's base URL, or "".
func checkBaseURL(s string) string { return framework.BaseURLProblem(s, "api_key") }

// checkProxy returns what is wrong with a proxy URL, or "". The message
// never repeats the URL: it may carry credentials.
func checkProxy(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "is not a valid URL"
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5" && u.Scheme != "socks5h":
		return "must be an http, https or socks5 URL"
	case u.Hostname() == "":
		return "must name a host"
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return "must not have a path, a query or a fragment"
	}
	return ""
}

// fallbackProblems checks every provider's fallback names a configured
// provider and that following fallbacks never comes back to where it
// started. It returns problems keyed "<name>.fallback".
func fallbackProblems(providers map[string]ProviderConfig) []framework.ConfigError {
	var errs []framework.ConfigError
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range providers {
			if !yield(k) {
				return
			}
		}
	})
	for _, n := range names {
		fb := providers[n].Fallback
		if fb == "" {
			continue
		}
		if _, ok := providers[fb]; !ok {
			fix := "name a configured provider"
			if len(names) > 0 {
				fix += ": " + strings.Join(names, ", ")
			}
			errs = append(errs, framework.ConfigError{Key: n + ".fallback", Problem: fmt.Sprintf("names %q, which is not a configured provider", fb), Fix: fix + "; or remove it"})
			continue
		}
		seen := map[string]bool{n: true}
		for cur := fb; cur != ""; cur = providers[cur].Fallback {
			if seen[cur] {
				errs = append(errs, framework.ConfigError{Key: n + ".fallback",
					Problem: "leads back to a provider already on the way (" + n + " → " + fb + " → … → " + cur + ")",
					Fix:     "break the loop: the last provider of a chain has no fallback"})
				break
			}
			seen[cur] = true
		}
	}
	return errs
}
