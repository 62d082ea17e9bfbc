package grpc

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Defaults of an upstream. docs/grpc.md gives the reason for each.
const (
	// DefaultTimeout bounds a whole unary call, every attempt and every wait
	// included: a lookup between services answers in milliseconds, and a
	// second is what the caller's own request can afford to spend on it.
	DefaultTimeout = time.Second
	// DefaultStreamTimeout bounds a whole stream: a stream delivers for
	// longer than one answer takes, and still cannot run for ever.
	DefaultStreamTimeout = 30 * time.Second
	// DefaultAttempts counts the first attempt: at most two retries.
	DefaultAttempts = 3
	// DefaultBackoffBase is the ceiling of the first full-jitter wait.
	DefaultBackoffBase = 50 * time.Millisecond
	// DefaultBackoffMax caps one wait at a fifth of the timeout, as the http
	// client does: a longer wait would rarely leave the retry time to finish.
	DefaultBackoffMax = 200 * time.Millisecond
	// DefaultResolveEvery is the time between two resolutions of a
	// discovered target's name (discover = true): the time-to-live CoreDNS
	// gives a Kubernetes headless Service's records, as for the http
	// plugin's discovered upstreams.
	DefaultResolveEvery = egress.DefaultResolveEvery
)

// The kinds of retry budget (retry_budget), every plugin's two.
const (
	BudgetWindow = resilience.BudgetWindow
	BudgetBucket = resilience.BudgetBucket
)

// DefaultRetryableCodes are the codes a retry may fix: UNAVAILABLE only.
// RESOURCE_EXHAUSTED is retried only when listed: a server out of resources
// needs less traffic, not more.
var DefaultRetryableCodes = []string{"UNAVAILABLE"}

// Config is the [plugin.grpc] table.
type Config struct {
	// Upstreams are the gRPC services this one calls, by name:
	// [plugin.grpc.upstreams.<name>]. Defaults to none.
	Upstreams map[string]Upstream `koanf:"upstreams"`
	// Server is [plugin.grpc.server]: the gRPC services this one serves.
	Server ServerConfig `koanf:"server"`
}

// Upstream is one gRPC service this one calls: the
// [plugin.grpc.upstreams.<name>] table, or the argument of [NewClient]. In
// NewClient a zero field takes its default; in the configuration file a zero
// or negative deadline is an error.
type Upstream struct {
	// Name names the upstream in errors, metrics, logs and /ready. The plugin
	// sets it from the table's name. Defaults to "upstream" in NewClient.
	Name string `koanf:"-"`

	// Target is the gRPC target: "host:port", or a URI such as
	// "dns:///inventory:9000" or "unix:///run/inventory.sock". It is a deploy
	// key: JFAST_GRPC_UPSTREAMS__<NAME>__TARGET wins over the file. Required
	// unless instances is set; not with instances.
	Target string `koanf:"target"`
	// Instances lists the upstream's instances, each "host:port": each
	// gets a channel and a breaker of its own, each attempt of a call picks
	// one by balancing, a retry goes to another, and an instance whose
	// breaker is open is skipped (ejected) while the others serve. Not with
	// target. A deploy key (JFAST_GRPC_UPSTREAMS__<NAME>__INSTANCES,
	// comma-separated). Defaults to none.
	Instances []string `koanf:"instances"`
	// Discover makes jfast resolve the target's name itself ("dns:///" or
	// a plain "host:port"), every resolve_every: every address it resolves
	// to (each A and AAAA record, a Kubernetes headless Service's ready
	// replicas) becomes an instance, with a channel and a breaker of its
	// own, as with instances; an address no longer listed has its channel
	// closed. Not with instances. Defaults to false (gRPC's own resolver and
	// balancing over the target's addresses, with no breaker per address).
	Discover bool `koanf:"discover"`
	// ResolveEvery is the time between two resolutions of a discovered
	// target's name; refused without discover. Defaults to 5s
	// ([DefaultResolveEvery]).
	ResolveEvery time.Duration `koanf:"resolve_every"`
	// Insecure sends plain text, without TLS. Only set it for a local
	// service or behind a mesh that encrypts. Deploy key. Defaults to false
	// (TLS with the system's roots).
	Insecure bool `koanf:"insecure"`
	// CAFile is a PEM file of the certificate authorities that sign the
	// upstream's certificate, trusted instead of the system's roots. Deploy
	// key. Defaults to "" (the system's roots).
	CAFile string `koanf:"ca_file"`
	// ServerName is the name the upstream's certificate must carry, when it
	// is not the target's host. Deploy key. Defaults to "" (the target's host).
	ServerName string `koanf:"server_name"`
	// Compression compresses requests ("gzip"); the upstream answers in kind
	// when it can. Defaults to "" (none).
	Compression string `koanf:"compression"`
	// Balancing spreads calls over the addresses the target resolves to
	// (every A/AAAA record of a "dns:///" target, a Kubernetes headless
	// Service's ready replicas): "round_robin" (each call to the next ready
	// address), "least_request" (power of two choices over calls in flight,
	// as the http plugin's instances) or "pick_first" (one address until it
	// fails). An address whose connection failed is skipped until it
	// reconnects. Defaults to "round_robin".
	Balancing string `koanf:"balancing"`
	// HealthCheck watches each address's grpc.health.v1.Health (the
	// health_service it names) and sends no call to one that reports
	// NOT_SERVING, as a jfast server does while a critical dependency of
	// its own is unreachable. Not with "pick_first". Defaults to false.
	HealthCheck bool `koanf:"health_check"`
	// HealthService is the service name health_check asks about.
	// Defaults to "" (the server as a whole).
	HealthService string `koanf:"health_service"`

	// StreamTimeout bounds a whole stream, from its opening to its last
	// message. Defaults to 30s.
	StreamTimeout time.Duration `koanf:"stream_timeout"`

	// RetryableCodes are the status codes another attempt may fix, by their
	// names ("UNAVAILABLE"). Defaults to ["UNAVAILABLE"].
	RetryableCodes []string `koanf:"retryable_codes"`
	// IdempotentMethods are the unary methods safe to repeat, by full name
	// ("/shop.Inventory/GetStock"): the only ones retried. Defaults to none.
	IdempotentMethods []string `koanf:"idempotent_methods"`
	// RestartStreams are the server-streaming methods that may be opened
	// again after a retryable failure, by full name. A restarted stream
	// delivers again from its first message: the caller sees duplicates.
	// Defaults to none (a failed stream returns its error).
	RestartStreams []string `koanf:"restart_streams"`
	// PolicyConfig is the attempts, timeout, backoff, retry budget,
	// bulkhead and breaker keys every plugin that calls out shares
	// (docs/resilience.md, "The policy keys"), with a gRPC lookup's
	// defaults: timeout 1s (it bounds a unary call; the deadline left
	// travels to the upstream as grpc-timeout), backoff_base 50ms and
	// backoff_max 200ms (a fifth of the timeout). Only the methods in
	// idempotent_methods (and the streams in restart_streams) are ever
	// retried: attempts > 1 with both lists empty is refused at boot.
	// max_concurrent counts open streams too.
	resilience.PolicyConfig `koanf:",squash"`

	// ForwardAuthorization sends the caller's bearer token (see
	// framework.BearerToken) to this upstream as "authorization" metadata.
	// Defaults to false.
	ForwardAuthorization bool `koanf:"forward_authorization"`
	// Headers are metadata sent with every call, by lower-case key; the
	// call's own outgoing metadata wins over them. Each entry is a deploy
	// key (it often carries a credential):
	// JFAST_GRPC_UPSTREAMS__<NAME>__HEADERS__<KEY> wins over the file.
	// Defaults to none.
	Headers map[string]string `koanf:"headers"`

	// TLS replaces the TLS configuration built from ca_file and server_name
	// (NewClient only; it cannot be set from the file). An upstream with its
	// own TLS value gets a channel of its own. Defaults to nil.
	TLS *tls.Config `koanf:"-"`
}

// SetDefaults implements framework.Defaulter: each
// [plugin.grpc.upstreams.<name>] starts from the defaults before the file and
// the environment apply.
func (u *Upstream) SetDefaults() {
	keep := *u
	*u = Upstream{
		Name:                 keep.Name,
		Target:               keep.Target,
		Instances:            keep.Instances,
		Discover:             keep.Discover,
		Insecure:             keep.Insecure,
		CAFile:               keep.CAFile,
		ServerName:           keep.ServerName,
		Compression:          keep.Compression,
		Balancing:            BalanceRoundRobin,
		StreamTimeout:        DefaultStreamTimeout,
		ResolveEvery:         DefaultResolveEvery,
		PolicyConfig:         defaultPolicy(),
		RetryableCodes:       slices.Clone(DefaultRetryableCodes),
		IdempotentMethods:    keep.IdempotentMethods,
		RestartStreams:       keep.RestartStreams,
		ForwardAuthorization: keep.ForwardAuthorization,
		Headers:              keep.Headers,
		TLS:                  keep.TLS,
	}
}

// defaultPolicy returns the policy keys' defaults, with this plugin's
// backoff.
func defaultPolicy() resilience.PolicyConfig {
	p := resilience.DefaultPolicyConfig()
	p.Timeout, p.Attempts = DefaultTimeout, DefaultAttempts
	p.BackoffBase, p.BackoffMax = DefaultBackoffBase, DefaultBackoffMax
	return p
}

// withDefaults fills the zero fields of u, for NewClient.
func (u Upstream) withDefaults() Upstream {
	var d Upstream
	d.SetDefaults()
	fill := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&u.StreamTimeout, d.StreamTimeout)
	fill(&u.ResolveEvery, d.ResolveEvery)
	u.PolicyConfig.FillZero(d.PolicyConfig)
	if u.RetryableCodes == nil {
		u.RetryableCodes = d.RetryableCodes
	}
	u.Balancing = cmp.Or(u.Balancing, d.Balancing)
	if u.Name == "" {
		u.Name = "upstream"
	}
	return u
}

// ServerConfig is [plugin.grpc.server].
type ServerConfig struct {
	// Listen is the address the gRPC server listens on, such as
	// "127.0.0.1:9000". It is a deploy key: JFAST_GRPC_SERVER__LISTEN wins
	// over the file. Defaults to "" (this service serves no gRPC).
	Listen string `koanf:"listen"`
	// Reflection serves grpc.reflection.v1, which lets tools such as grpcurl
	// list and call the services without their .proto files. It also tells
	// anyone who can reach the port every method this service has.
	// Defaults to false.
	Reflection bool `koanf:"reflection"`
}

// codeList names the status codes as the gRPC specification writes them,
// indexed by code.
var codeList = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// codeNames maps the specification's names to the codes.
var codeNames = func() map[string]codes.Code {
	m := make(map[string]codes.Code, len(codeList))
	for i, n := range codeList {
		m[n] = codes.Code(i)
	}
	return m
}()

// codeName returns the specification's name of c ("UNAVAILABLE").
func codeName(c codes.Code) string {
	if int(c) < len(codeList) {
		return codeList[c]
	}
	return fmt.Sprintf("CODE_%d", uint32(c))
}

// problems returns every problem with u's settings, in key order.
func (u *Upstream) problems() []framework.ConfigError {
	var l framework.Problems
	add, deadline := l.Error, l.Deadline

	if len(u.Instances) > 0 {
		u.instanceProblems(&l)
	} else if u.Discover {
		u.discoverProblems(&l)
	} else if problem := checkTarget(u.Target); problem != "" {
		add("target", problem, `set an address such as "inventory:9000" or "dns:///inventory:9000", in the file or in JFAST_GRPC_UPSTREAMS__<NAME>__TARGET (or list the instances in instances)`)
	}
	if u.Insecure && (u.CAFile != "" || u.ServerName != "") {
		add("insecure", "is true while ca_file or server_name configures TLS",
			"remove insecure to call over TLS, or remove ca_file and server_name to send plain text")
	}
	if u.CAFile != "" {
		if problem := checkCAFile(u.CAFile); problem != "" {
			add("ca_file", problem, "point it at a readable PEM file of CA certificates, or remove it to trust the system's roots")
		}
	}
	if u.Compression != "" && u.Compression != "gzip" {
		add("compression", fmt.Sprintf("must be \"gzip\" or empty, got %q", u.Compression), `set "gzip", or remove the key to send uncompressed`)
	}
	u.balancingProblems(&l)
	deadline("stream_timeout", u.StreamTimeout)
	deadline("resolve_every", u.ResolveEvery)
	if !u.Discover && u.ResolveEvery > 0 && u.ResolveEvery != DefaultResolveEvery {
		add("resolve_every", "is set while discover is false: nothing is resolved by jfast",
			"set discover = true (the target's name resolved every resolve_every), or remove resolve_every")
	}
	for _, list := range []struct {
		key     string
		methods []string
	}{{"idempotent_methods", u.IdempotentMethods}, {"restart_streams", u.RestartStreams}} {
		seen := map[string]bool{}
		for _, m := range list.methods {
			switch {
			case !validMethod(m):
				add(list.key, fmt.Sprintf("%q is not a full method name", m), `write it as "/package.Service/Method", such as "/shop.Inventory/GetStock"`)
			case seen[m]:
				add(list.key, fmt.Sprintf("lists %q twice", m), "keep one")
			}
			seen[m] = true
		}
	}
	if u.Attempts > 1 && len(u.IdempotentMethods) == 0 && len(u.RestartStreams) == 0 {
		add("attempts", fmt.Sprintf("is %d but idempotent_methods is empty, so no call could be retried", u.Attempts),
			`list the methods that are safe to repeat in idempotent_methods (such as ["/shop.Inventory/GetStock"]), or set attempts = 1`)
	}
	if u.Attempts == 1 && len(u.RestartStreams) > 0 {
		add("restart_streams", "lists streams to restart while attempts = 1 allows no second attempt", "set attempts above 1, or empty restart_streams")
	}
	if len(u.RetryableCodes) == 0 && u.Attempts > 1 {
		add("retryable_codes", "is empty while attempts is above 1", `list the codes a retry may fix, such as ["UNAVAILABLE"], or set attempts = 1`)
	}
	for _, n := range u.RetryableCodes {
		c, ok := codeNames[n]
		switch {
		case !ok:
			add("retryable_codes", fmt.Sprintf("%q is not a gRPC status code name", n), `use the names of the gRPC specification, such as "UNAVAILABLE" or "RESOURCE_EXHAUSTED"`)
		case c == codes.OK || c == codes.Canceled || c == codes.DeadlineExceeded:
			add("retryable_codes", fmt.Sprintf("lists %s, which a retry cannot fix (the call succeeded, was cancelled by its caller, or has no time left)", n), "remove it")
		}
	}
	u.PolicyConfig.Validate(&l)

	keys := make([]string, 0, len(u.Headers))
	for k := range u.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if problem, fix := checkMetadataKey(k); problem != "" {
			add("headers."+k, problem, fix)
		} else if !printable(u.Headers[k]) {
			add("headers."+k, "holds a character metadata cannot carry (a control character or non-ASCII)", "use printable ASCII only")
		}
	}
	return l
}

// checkTarget returns what is wrong with a gRPC target, or "". The message
// never repeats the target.
func checkTarget(s string) string {
	if s == "" {
		return "is missing"
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return "must not contain spaces"
	}
	if scheme, rest, ok := strings.Cut(s, ":///"); ok {
		switch scheme {
		case "dns", "unix", "passthrough":
		default:
			return fmt.Sprintf("has the scheme %q; jfast knows dns, unix and passthrough", scheme)
		}
		if rest == "" {
			return "names no address after the scheme"
		}
		if _, port, err := net.SplitHostPort(rest); err == nil && scheme != "unix" {
			return framework.PortProblem(port)
		}
		return ""
	}
	if strings.HasPrefix(s, "unix:") {
		return ""
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || port == "" {
		return `must be "host:port" or a URI such as "dns:///host:port"`
	}
	return framework.PortProblem(port)
}

// checkCAFile returns what is wrong with a CA file, or "".
func checkCAFile(path string) string {
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("cannot be read: %v", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return "holds no PEM certificate"
	}
	return ""
}

// validMethod reports whether s is a full gRPC method name,
// "/package.Service/Method".
func validMethod(s string) bool {
	rest, ok := strings.CutPrefix(s, "/")
	if !ok {
		return false
	}
	service, method, ok := strings.Cut(rest, "/")
	return ok && service != "" && method != "" && !strings.ContainsAny(method, "/ ") && !strings.Contains(service, " ")
}

// checkMetadataKey returns what is wrong with a configured metadata key and
// the fix, or "".
func checkMetadataKey(k string) (string, string) {
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.':
		case c >= 'A' && c <= 'Z':
			return "has an upper-case letter; gRPC metadata keys are lower case", "write the key in lower case"
		case c == '_':
			return `has "_"; a JFAST_* variable keeps "_" as is, so it could never replace a key written with "-"`,
				`write the key with "-" (JFAST_GRPC_UPSTREAMS__<NAME>__HEADERS__X_API_KEY names the key x_api_key, which the file cannot then hold)`
		default:
			return fmt.Sprintf("has %q, which a metadata key cannot hold", c), "use lower-case letters, digits, - and . only"
		}
	}
	switch {
	case k == "":
		return "is empty", "name the key"
	case strings.HasPrefix(k, "grpc-"):
		return `starts with "grpc-", which gRPC reserves`, "choose another name"
	case strings.HasSuffix(k, "-bin"):
		return `ends with "-bin", which marks binary metadata a text value cannot hold`, "choose another name, or send it per call"
	case k == "te" || k == "content-type" || k == "user-agent" || k == "x-request-id":
		return "is set by gRPC or by jfast itself", "remove it"
	}
	return "", ""
}

// printable reports whether s is printable ASCII (space to ~).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

// checkListen returns what is wrong with the server's listen address, or "".
func checkListen(s string) string {
	host, port, err := net.SplitHostPort(s)
	_ = host
	if err != nil || port == "" {
		return `must be "host:port", such as "127.0.0.1:9000"`
	}
	return ""
}
