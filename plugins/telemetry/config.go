package telemetry

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/jfastframework/jfast/framework"
)

// Exporter names.
const (
	ExporterOTLP   = "otlp"
	ExporterStdout = "stdout"
	ExporterNone   = "none"
)

// Config is the [plugin.telemetry] table.
type Config struct {
	// Exporter is where spans go: "otlp" (OTLP over HTTP/protobuf to a
	// collector), "stdout" (one JSON document per span, for development) or
	// "none" (nothing is recorded and nothing is propagated). Defaults to "otlp".
	Exporter string `koanf:"exporter"`

	// Endpoint is the OTLP/HTTP URL of the collector's traces endpoint, e.g.
	// "http://collector:4318/v1/traces" ("/v1/traces" is added when the URL has
	// no path). It is a deploy key: JFAST_TELEMETRY_ENDPOINT wins over the
	// file, and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT
	// win over a value from the file. Defaults to
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT +
	// "/v1/traces", else "https://localhost:4318/v1/traces" (the OTLP
	// exporter's default).
	Endpoint string `koanf:"endpoint"`

	// SampleRatio is the fraction of new traces recorded, in [0, 1]. Sampling
	// is parent-based: a request that arrives with a traceparent follows the
	// caller's decision. Defaults to 1.
	SampleRatio float64 `koanf:"sample_ratio"`

	// ServiceName is the service.name resource attribute. Defaults to
	// app.name.
	ServiceName string `koanf:"service_name"`

	// ServiceVersion is the service.version resource attribute. Defaults to ""
	// (the main module's version from the build information, when known).
	ServiceVersion string `koanf:"service_version"`

	// ResourceAttributes are added to the resource of every span; they win over
	// OTEL_RESOURCE_ATTRIBUTES. Dotted names are TOML dotted keys
	// (deployment.region = "eu-west-1" is the attribute "deployment.region");
	// values are strings, numbers or booleans. Defaults to none.
	ResourceAttributes map[string]any `koanf:"resource_attributes"`

	// ExportTimeout bounds one export of a batch to the collector. Defaults to 10s.
	ExportTimeout time.Duration `koanf:"export_timeout"`

	// BatchTimeout is the longest a finished span waits before its batch is
	// exported. Defaults to 5s.
	BatchTimeout time.Duration `koanf:"batch_timeout"`

	// MaxQueueSize bounds the finished spans waiting for export; a span that
	// does not fit is dropped and counted. Defaults to 2048.
	MaxQueueSize int `koanf:"max_queue_size"`

	// MaxExportBatchSize is the most spans sent in one export. Defaults to 512.
	MaxExportBatchSize int `koanf:"max_export_batch_size"`

	// UntracedPaths are request paths that get no server span: the probes and
	// the scrape, which arrive every few seconds and would drown the traces
	// that matter. Exact paths, no patterns. Defaults to ["/live", "/ready",
	// "/metrics"].
	UntracedPaths []string `koanf:"untraced_paths"`
}

// DefaultConfig returns the [plugin.telemetry] defaults.
func DefaultConfig() Config {
	return Config{
		Exporter:           ExporterOTLP,
		SampleRatio:        1,
		ExportTimeout:      10 * time.Second,
		BatchTimeout:       5 * time.Second,
		MaxQueueSize:       2048,
		MaxExportBatchSize: 512,
		UntracedPaths:      []string{"/live", "/ready", "/metrics"},
	}
}

// validate checks the table; checkEndpoint is false when the endpoint in force
// came from an OTEL_* variable or the exporter's default, which the exporter reads
// itself.
func (c *Config) validate(v *framework.Validation, checkEndpoint bool) {
	switch c.Exporter {
	case ExporterOTLP, ExporterStdout, ExporterNone:
	default:
		v.Error("exporter", fmt.Sprintf("must be %q, %q or %q, got %q", ExporterOTLP, ExporterStdout, ExporterNone, c.Exporter),
			`set exporter = "otlp" to send spans to a collector, "stdout" to print them, "none" to record nothing`)
	}
	if checkEndpoint && c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.Error("endpoint", "must be an absolute http or https URL", `set endpoint = "http://collector:4318" (or JFAST_TELEMETRY_ENDPOINT)`)
		} else if u.User != nil {
			v.Error("endpoint", "must not carry credentials", "send collector credentials with OTEL_EXPORTER_OTLP_HEADERS")
		}
	}
	if math.IsNaN(c.SampleRatio) || c.SampleRatio < 0 || c.SampleRatio > 1 {
		v.Error("sample_ratio", fmt.Sprintf("must be between 0 and 1, got %v", c.SampleRatio), "set sample_ratio = 1 to record every trace, 0.1 for one in ten")
	}
	v.Deadline("export_timeout", c.ExportTimeout)
	v.Deadline("batch_timeout", c.BatchTimeout)
	v.Positive("max_queue_size", c.MaxQueueSize)
	v.Positive("max_export_batch_size", c.MaxExportBatchSize)
	if c.MaxExportBatchSize > 0 && c.MaxQueueSize > 0 && c.MaxExportBatchSize > c.MaxQueueSize {
		v.Error("max_export_batch_size", fmt.Sprintf("must not exceed max_queue_size (%d), got %d", c.MaxQueueSize, c.MaxExportBatchSize),
			"lower max_export_batch_size or raise max_queue_size")
	}
	for i, path := range c.UntracedPaths {
		if !strings.HasPrefix(path, "/") {
			v.Error(fmt.Sprintf("untraced_paths[%d]", i), fmt.Sprintf("%q is not a path starting with /", path), `list exact paths such as "/live"`)
		}
	}
	if _, err := flattenAttributes(c.ResourceAttributes); err != nil {
		v.Error("resource_attributes", err.Error(), `write each attribute as name = "value" (a string, number or boolean)`)
	}
}

// flattenAttributes turns the resource_attributes table into attributes: a
// nested table (what a TOML dotted key is) joins its names with ".".
func flattenAttributes(m map[string]any) ([]attribute.KeyValue, error) {
	var out []attribute.KeyValue
	var walk func(prefix string, m map[string]any) error
	walk = func(prefix string, m map[string]any) error {
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			if k == "" {
				return fmt.Errorf("has an empty attribute name under %q", prefix)
			}
			switch v := m[k].(type) {
			case map[string]any:
				if err := walk(name, v); err != nil {
					return err
				}
			case string:
				out = append(out, attribute.String(name, v))
			case bool:
				out = append(out, attribute.Bool(name, v))
			case int64:
				out = append(out, attribute.Int64(name, v))
			case int:
				out = append(out, attribute.Int(name, v))
			case float64:
				out = append(out, attribute.Float64(name, v))
			default:
				return fmt.Errorf("attribute %q must be a string, number or boolean, got %T", name, v)
			}
		}
		return nil
	}
	err := walk("", m)
	return out, err
}
