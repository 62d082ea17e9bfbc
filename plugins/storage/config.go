package storage

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Config is the [plugin.storage] table.
type Config struct {
	// Default names the disk [Plugin.Default] and For(app, "") return. It may be
	// left empty when exactly one disk is configured. Defaults to "".
	Default string `koanf:"default"`

	// RoutePrefix is where the plugin mounts the route that serves temporary URLs
	// of local disks: GET <route_prefix>/<disk>/<key>?expires=...&signature=....
	// Defaults to "/_storage".
	RoutePrefix string `koanf:"route_prefix"`

	// PublicURL is this service's public base URL ("https://api.example.com"),
	// put in front of the temporary URLs of local disks. Empty makes them paths
	// relative to the service. It is a deploy key. Defaults to "".
	PublicURL string `koanf:"public_url"`

	// Disks are the named disks, [plugin.storage.disks.<name>].
	// Defaults to none: at least one is required.
	Disks map[string]DiskConfig `koanf:"disks"`
}

// DiskConfig is one [plugin.storage.disks.<name>] table. Keys of the other driver
// are refused, so a disk cannot silently ignore a setting.
type DiskConfig struct {
	// Driver is "local" (a directory) or "s3" (an S3 bucket, or an S3-compatible
	// server with endpoint and path_style). Defaults to "local".
	Driver string `koanf:"driver"`

	// Visibility is "public" (URL gives a permanent address under base_url) or
	// "private" (only TemporaryURL gives access). Anything else refuses to boot.
	// Defaults to "private".
	Visibility string `koanf:"visibility"`

	// BaseURL is the public address of the disk's objects, for URL: a CDN, a web
	// server over the local root, or the bucket's public address. Required for a
	// public local disk; an s3 disk without it uses the bucket's own address.
	// It is a deploy key. Defaults to "".
	BaseURL string `koanf:"base_url"`

	// Root is the local disk's directory. It is created at start when missing
	// (or by the first operation, when it could not be at start), and never
	// again once opened: a root that goes away is an outage until it is back.
	// It is a deploy key. Defaults to "".
	Root string `koanf:"root"`

	// SigningKey is the HMAC-SHA256 key of the local disk's temporary URLs. In
	// production it must be at least 32 bytes; in development an empty key is
	// replaced by a random one per process (temporary URLs then work only on
	// the replica that made them). It is a deploy key. Defaults to "".
	SigningKey string `koanf:"signing_key"`

	// Bucket is the s3 disk's bucket. It is a deploy key. Defaults to "".
	Bucket string `koanf:"bucket"`

	// Region is the s3 disk's region. It is a deploy key. Defaults to "us-east-1".
	Region string `koanf:"region"`

	// Endpoint is the address of an S3-compatible server ("http://127.0.0.1:7070");
	// empty means AWS S3 itself. It is a deploy key. Defaults to "".
	Endpoint string `koanf:"endpoint"`

	// PathStyle addresses the bucket as <endpoint>/<bucket>/<key> instead of
	// <bucket>.<endpoint>/<key>, as most S3-compatible servers need.
	// Defaults to false.
	PathStyle bool `koanf:"path_style"`

	// AccessKey and SecretKey are static credentials; both or neither must be
	// set. With neither, the AWS SDK's default credential chain is used
	// (environment, shared files, instance or task role). Both are deploy keys.
	// Defaults to "".
	AccessKey string `koanf:"access_key"`
	// SecretKey: see AccessKey. Defaults to "".
	SecretKey string `koanf:"secret_key"`

	// ConnectTimeout bounds each TCP connect and TLS handshake to S3.
	// Defaults to 5s (docs/design.md, "Per-dependency defaults").
	ConnectTimeout time.Duration `koanf:"connect_timeout"`

	// ReadTimeout is the longest gap between bytes on an S3 connection, in either
	// direction, not the whole transfer: a slow transfer that keeps moving is not
	// cut, a stalled one fails after this. It also bounds the wait for a
	// response to begin. Defaults to 30s (docs/design.md, "Per-dependency defaults").
	ReadTimeout time.Duration `koanf:"read_timeout"`

	// PolicyConfig is the policy keys every plugin that calls out shares
	// (attempts, timeout, backoff, retry budget, bulkhead, throttle,
	// hedging, breaker_*; docs/resilience.md), s3 only. Each S3 request
	// of an operation is one call of the disk's policy. timeout bounds a
	// call until the object's bytes move: a Stat, a Delete and a List page
	// whole, a Get until its response headers, a Put (or a part of one)
	// until S3 begins reading its body; a transfer that keeps moving is
	// bounded by read_timeout's gap only. Defaults to the shared policy
	// defaults (attempts 3, timeout 10s).
	resilience.PolicyConfig `koanf:",squash"`
}

// Drivers and visibilities.
const (
	DriverLocal = "local"
	DriverS3    = "s3"
)

// Visibility is a disk's visibility: [Public] or [Private].
type Visibility string

const (
	// Public objects have a permanent address: Disk.URL.
	Public Visibility = "public"
	// Private objects are reached only through Disk.TemporaryURL.
	Private Visibility = "private"
)

// minSigningKey is the production minimum for signing_key: HMAC-SHA256's block of
// security is 256 bits, the same rule as the auth plugin's HMAC secret.
const minSigningKey = 32

// SetDefaults implements framework.Defaulter: every disk table starts from these.
func (c *DiskConfig) SetDefaults() {
	*c = DiskConfig{
		Driver:         DriverLocal,
		Visibility:     string(Private),
		Region:         "us-east-1",
		ConnectTimeout: 5 * time.Second,
		ReadTimeout:    30 * time.Second,
		PolicyConfig:   resilience.DefaultPolicyConfig(),
	}
}

func defaultConfig() Config {
	return Config{RoutePrefix: "/_storage"}
}

func (c *Config) validate(v *framework.Validation) {
	if !strings.HasPrefix(c.RoutePrefix, "/") || strings.HasSuffix(c.RoutePrefix, "/") || strings.ContainsAny(c.RoutePrefix, "{}*?#") {
		v.Error("route_prefix", fmt.Sprintf("must be a path starting with / and not ending with /, got %q", c.RoutePrefix),
			`set route_prefix = "/_storage"`)
	}
	if c.PublicURL != "" {
		checkHTTPURL(v, "public_url", c.PublicURL, `set public_url = "https://api.example.com", or leave it empty for relative temporary URLs`)
	}
	if len(c.Disks) == 0 {
		v.Error("disks", "no disk is configured",
			`add a disk, e.g. [plugin.storage.disks.uploads] with driver = "local" and root = "/var/lib/app/uploads"`)
	}
	switch {
	case c.Default != "":
		if _, ok := c.Disks[c.Default]; !ok && len(c.Disks) > 0 {
			v.Error("default", fmt.Sprintf("names no configured disk: %q", c.Default),
				"set default to one of: "+strings.Join(slices.Sorted(maps.Keys(c.Disks)), ", "))
		}
	case len(c.Disks) > 1:
		v.Error("default", "must be set when there are several disks",
			"set default to one of: "+strings.Join(slices.Sorted(maps.Keys(c.Disks)), ", "))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Disks)) {
		d := c.Disks[name]
		sub := disksTable.Entry(v, name)
		// A disk's name is a path segment of the signed route and a metric label.
		if !disksTable.ValidateName(v, name) && framework.Unread(name) {
			continue
		}
		d.validate(sub)
	}
}

func (d *DiskConfig) validate(v *framework.Validation) {
	switch Visibility(d.Visibility) {
	case Public, Private:
	default:
		v.Error("visibility", fmt.Sprintf("must be \"public\" or \"private\", got %q", d.Visibility),
			`set visibility = "private" (temporary URLs only) or "public" (permanent URLs under base_url)`)
	}
	if d.BaseURL != "" {
		checkHTTPURL(v, "base_url", d.BaseURL, `set base_url = "https://cdn.example.com/uploads"`)
	}
	switch d.Driver {
	case DriverLocal:
		refuseKeys(v, s3Keys, DriverS3)
		if d.Root == "" {
			v.Error("root", "a local disk needs a root directory", `set root = "/var/lib/app/uploads"`)
		}
		if v.Production() && len(d.SigningKey) < minSigningKey {
			// The length only: the key itself never reaches an error.
			v.Error("signing_key", fmt.Sprintf("must be at least %d bytes in production, got %d", minSigningKey, len(d.SigningKey)),
				"set a random key of 32 bytes or more, e.g. from `openssl rand -base64 48`, in JFAST_STORAGE_DISKS__<NAME>__SIGNING_KEY")
		}
		if Visibility(d.Visibility) == Public && d.BaseURL == "" {
			v.Error("base_url", "a public local disk needs base_url: it is the address URL() returns",
				`set base_url to where a web server or CDN serves root, e.g. "https://cdn.example.com/uploads", or make the disk private`)
		}
	case DriverS3:
		refuseKeys(v, localKeys, DriverLocal)
		if d.Bucket == "" {
			v.Error("bucket", "an s3 disk needs a bucket", `set bucket = "my-bucket"`)
		}
		if d.Region == "" {
			v.Error("region", "an s3 disk needs a region", `set region = "us-east-1"`)
		}
		if d.Endpoint != "" {
			checkHTTPURL(v, "endpoint", d.Endpoint, `set endpoint = "http://127.0.0.1:7070" for an S3-compatible server, or remove it for AWS S3`)
		}
		switch {
		case d.AccessKey != "" && d.SecretKey == "":
			v.Error("secret_key", "access_key is set but secret_key is not",
				"set secret_key too (JFAST_STORAGE_DISKS__<NAME>__SECRET_KEY), or remove access_key to use the AWS default credential chain")
		case d.AccessKey == "" && d.SecretKey != "":
			v.Error("access_key", "secret_key is set but access_key is not",
				"set access_key too, or remove secret_key to use the AWS default credential chain")
		}
		v.Deadline("connect_timeout", d.ConnectTimeout)
		v.Deadline("read_timeout", d.ReadTimeout)
		d.PolicyConfig.ValidateUnhedged(v, "storage does not hedge: a second request for the same object would send or fetch it twice",
			"remove it; timeout and read_timeout bound a slow S3")
	default:
		v.Error("driver", fmt.Sprintf("must be \"local\" or \"s3\", got %q", d.Driver), `set driver = "local" or driver = "s3"`)
	}
}

// localKeys and s3Keys are the keys of one driver: a disk of the other
// refuses them.
var (
	localKeys = []string{"root", "signing_key"}
	s3Keys    = append([]string{"bucket", "region", "endpoint", "path_style", "access_key", "secret_key",
		"connect_timeout", "read_timeout"}, resilience.PolicyKeys()...)
)

// Applies implements framework.ConditionalKeys: a disk's keys are those of
// its driver, without hedge_after and max_hedges (storage does not hedge),
// so the config command prints a local disk without the S3 keys its
// validation would refuse.
func (d DiskConfig) Applies(key string) bool {
	switch {
	case key == "hedge_after" || key == "max_hedges":
		return false
	case d.Driver == DriverLocal:
		return !slices.Contains(s3Keys, key)
	case d.Driver == DriverS3:
		return !slices.Contains(localKeys, key)
	}
	return true
}

// WhyNot implements framework.KeyReasons: why a key of the other driver
// does not apply to a disk, for the fix of an old key renamed to it
// (retries on a local disk).
func (d DiskConfig) WhyNot(key string) string {
	if d.Applies(key) {
		return ""
	}
	switch {
	case d.Driver == DriverLocal && slices.Contains(resilience.PolicyKeys(), key):
		return "a local disk does not retry (" + key + " applies only to driver = \"s3\")"
	case d.Driver == DriverLocal:
		return key + " applies only to driver = \"s3\""
	case d.Driver == DriverS3 && slices.Contains(localKeys, key):
		return key + " applies only to driver = \"local\""
	}
	return ""
}

// disksTable is [plugin.storage.disks], in the words of its errors.
var disksTable = framework.NamedTable{Plugin: "storage", Key: "disks", Noun: "disk", Nouns: "disks"}

// refuseKeys reports keys of the other driver that the file or environment set.
func refuseKeys(v *framework.Validation, keys []string, driver string) {
	for _, k := range keys {
		if v.IsSet(k) {
			v.Error(k, "applies only to driver = \""+driver+"\"", "remove it, or set driver = \""+driver+"\"")
		}
	}
}

func checkHTTPURL(v *framework.Validation, key, raw, fix string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		v.Error(key, "must be an absolute http or https URL without credentials, query or fragment", fix)
	}
}
