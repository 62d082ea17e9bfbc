package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jfastframework/jfast/framework"
)

// Name is the plugin's name in [plugins] enabled and [plugin.telemetry].
const Name = "telemetry"

// instrumentationName names the tracer of every span the plugin makes.
const instrumentationName = "github.com/jfastframework/jfast/plugins/telemetry"

// Plugin records and exports traces. Make it with New.
type Plugin struct {
	cfg      Config
	exporter sdktrace.SpanExporter // from WithExporter; nil builds one from the config

	provider *sdktrace.TracerProvider
	tracer   atomic.Pointer[trace.Tracer] // nil until started, and with exporter = "none"
	prop     propagation.TextMapPropagator
	metrics  *metrics
	log      *slog.Logger

	// exporterReadsEnv is set by ResolveDefaults when the endpoint in force is an
	// OTEL_* variable's or the exporter's default: the exporter is then given no
	// endpoint and reads them itself (with OTEL_EXPORTER_OTLP_INSECURE and the rest).
	exporterReadsEnv bool
}

// Option configures New.
type Option func(*Plugin)

// WithExporter makes the plugin export to exp instead of the exporter the
// configuration names (tests pass an in-memory exporter; a service may pass
// any SDK exporter). exporter = "none" still turns everything off.
func WithExporter(exp sdktrace.SpanExporter) Option { return func(p *Plugin) { p.exporter = exp } }

// New returns the telemetry plugin with its configuration defaults.
func New(opts ...Option) *Plugin {
	p := &Plugin{cfg: DefaultConfig(), prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{})}
	for _, o := range opts {
		o(p)
	}
	return p
}

// From returns the App's telemetry plugin, or an error naming the fix when it
// is not enabled.
func From(app *framework.App) (*Plugin, error) { return framework.Get[*Plugin](app, Name) }

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return Name }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) { p.cfg.validate(v, !p.exporterReadsEnv) }

// otlpDefaultEndpoint is the OTLP/HTTP exporter's own default: TLS to a collector
// on the same host.
const otlpDefaultEndpoint = "https://localhost:4318/v1/traces"

// ResolveDefaults implements framework.Resolver: service_name defaults to
// app.name, and endpoint shows the collector in force — JFAST_TELEMETRY_ENDPOINT
// over everything, then OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
// OTEL_EXPORTER_OTLP_ENDPOINT over the file, then the file, then the exporter's
// default (https://localhost:4318/v1/traces).
func (p *Plugin) ResolveDefaults(r *framework.Resolution) {
	c := &p.cfg
	if c.ServiceName == "" {
		c.ServiceName = r.App().Name
		r.Computed("service_name", "default: app.name")
	}
	p.exporterReadsEnv = false
	if c.Exporter != ExporterOTLP || strings.HasPrefix(r.Source("endpoint"), "env ") {
		return
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := os.Getenv(name); v != "" {
			if name == "OTEL_EXPORTER_OTLP_ENDPOINT" {
				v = strings.TrimSuffix(v, "/") + "/v1/traces" // as the exporter does
			}
			c.Endpoint = framework.MaskSecrets(v)
			p.exporterReadsEnv = true
			r.Computed("endpoint", "env "+name)
			return
		}
	}
	if c.Endpoint == "" {
		c.Endpoint = otlpDefaultEndpoint
		p.exporterReadsEnv = true
		r.Computed("endpoint", "default: the OTLP exporter's")
	}
}

// DeployKeys implements framework.DeployKeyer: where the collector is depends
// on where the service runs.
func (p *Plugin) DeployKeys() []string { return []string{"endpoint"} }

// exporting reports whether the configuration records and exports spans.
func (p *Plugin) exporting() bool { return p.cfg.Exporter != ExporterNone }

// Tracer returns the tracer for a service's own spans: a no-op tracer before
// the plugin starts and with exporter = "none".
func (p *Plugin) Tracer() trace.Tracer {
	if t := p.tracer.Load(); t != nil {
		return *t
	}
	return noop.NewTracerProvider().Tracer(instrumentationName)
}

// TracerProvider returns the provider of the plugin's spans, for a plugin
// that instruments a library of its own (the grpc plugin's otelgrpc
// handlers), or nil before the plugin starts and with exporter = "none".
func (p *Plugin) TracerProvider() trace.TracerProvider {
	if p.provider == nil {
		return nil
	}
	return p.provider
}

// Propagator is the W3C trace-context propagator the plugin injects and
// extracts with.
func (p *Plugin) Propagator() propagation.TextMapPropagator { return p.prop }

// ForceFlush exports every finished span now, within ctx (tests, scripts
// about to exit).
func (p *Plugin) ForceFlush(ctx context.Context) error {
	if p.provider == nil {
		return nil
	}
	return p.provider.ForceFlush(ctx)
}

// Start implements framework.Starter: it builds the exporter (no connection
// is made: a collector that is down does not fail the boot), registers the
// metrics and the log source, and installs the client seam of the http plugin
// and the job seam of the queue plugin when they are enabled.
func (p *Plugin) Start(ctx context.Context, app *framework.App) error {
	p.log = app.Logger().With(slog.String("plugin", Name))
	if !p.exporting() {
		return nil
	}
	p.metrics = newMetrics()
	if err := p.metrics.register(app.Metrics()); err != nil {
		return err
	}
	exp := p.exporter
	if exp == nil {
		var err error
		if exp, err = p.newExporter(ctx, app); err != nil {
			return err
		}
	}
	res, err := p.resource(ctx, app)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return err
	}
	p.provider = sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(p.cfg.SampleRatio))),
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(newBatcher(exp, p.cfg, app.Clock(), p.metrics, p.log)),
	)
	t := p.provider.Tracer(instrumentationName)
	p.tracer.Store(&t)
	app.AddLogSource(logSource)

	if h, err := framework.Get[framework.HTTPInstrumentable](app, "http"); err == nil {
		if err := errors.Join(h.AddTransportWrapper(p.wrapTransport), h.ObserveCalls(p.observeCall)); err != nil {
			_ = p.provider.Shutdown(ctx)
			return fmt.Errorf("telemetry: instrument the http plugin: %w", err)
		}
	}
	p.instrumentQueue(app.Plugin("queue"))
	return nil
}

// instrumentQueue stores the trace context with every job the queue plugin
// enqueues, and continues it when the job runs: with a span per attempt when
// the queue offers AddJobObserver, else by running the job under the
// enqueuing trace (its calls and dependency spans join that trace; the
// attempt itself has no span).
func (p *Plugin) instrumentQueue(q framework.Plugin) {
	h, ok := q.(framework.JobMetadataHooks)
	if !ok {
		return
	}
	if o, ok := q.(framework.JobObservable); ok {
		h.AddMetadataHooks(p.InjectJob, nil)
		o.AddJobObserver(p.ObserveJob)
		return
	}
	h.AddMetadataHooks(p.InjectJob, p.ExtractJob)
}

// Stop implements framework.Stopper: it exports the spans still queued and
// shuts the exporter down, within ctx (app.plugin_stop_timeout).
func (p *Plugin) Stop(ctx context.Context) error {
	if p.provider == nil {
		return nil
	}
	if err := p.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: flush spans: %w", err)
	}
	return nil
}

func (p *Plugin) newExporter(ctx context.Context, app *framework.App) (sdktrace.SpanExporter, error) {
	switch p.cfg.Exporter {
	case ExporterStdout:
		exp, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
		if err != nil {
			return nil, fmt.Errorf("telemetry: stdout exporter: %w", err)
		}
		return exp, nil
	default:
		opts := []otlptracehttp.Option{otlptracehttp.WithTimeout(p.cfg.ExportTimeout)}
		if ep := p.endpoint(); ep != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(ep))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
		}
		return exp, nil
	}
}

// endpoint is the collector URL to configure, or "" to let the exporter read
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT (or use its
// default). JFAST_TELEMETRY_ENDPOINT wins over everything; the OTEL variables
// win over the file.
// (ResolveDefaults decided which.)
func (p *Plugin) endpoint() string {
	if p.exporterReadsEnv || p.cfg.Endpoint == "" {
		return ""
	}
	return withTracesPath(p.cfg.Endpoint)
}

// withTracesPath adds the OTLP traces path to a bare collector address, as
// OTEL_EXPORTER_OTLP_ENDPOINT does.
func withTracesPath(ep string) string {
	if i := strings.Index(ep, "://"); i >= 0 && !strings.Contains(ep[i+3:], "/") {
		return ep + "/v1/traces"
	}
	if strings.HasSuffix(ep, "/") && strings.Count(ep, "/") == 3 {
		return ep + "v1/traces"
	}
	return ep
}

// resource describes the service: OTEL_RESOURCE_ATTRIBUTES and
// OTEL_SERVICE_NAME first, then the configuration, which wins.
func (p *Plugin) resource(ctx context.Context, app *framework.App) (*resource.Resource, error) {
	name := p.cfg.ServiceName
	if name == "" {
		name = app.Config().Name
	}
	version := p.cfg.ServiceVersion
	if version == "" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", name),
		attribute.String("deployment.environment.name", app.Config().Env),
		attribute.String("telemetry.sdk.language", "go"),
	}
	if version != "" {
		attrs = append(attrs, attribute.String("service.version", version))
	}
	extra, err := flattenAttributes(p.cfg.ResourceAttributes)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource_attributes: %w", err) // refused by Validate already
	}
	attrs = append(attrs, extra...)
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithAttributes(attrs...))
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// logSource adds the active span's trace_id and span_id to log records.
func logSource(ctx context.Context) []slog.Attr {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []slog.Attr{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
}

var (
	_ framework.BackingServicePlugin = (*Plugin)(nil)
	_ framework.Middlewarer          = (*Plugin)(nil)
)
