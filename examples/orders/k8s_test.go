package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/jfastframework/jfast/examples/orders/service"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// readyOverHTTP is what /ready may take beyond readiness_timeout over a real
// socket when a check hangs (readiness's TestReadyBoundedOverHTTP and
// docs/readiness.md: within timeout + 100 ms).
const readyOverHTTP = 100 * time.Millisecond

// coreDNSTTL is how long CoreDNS serves a headless Service's records from
// its cache: its kubernetes plugin's default TTL.
const coreDNSTTL = 5 * time.Second

// callerLag is how long a replica keeps getting new calls after its pod
// starts terminating: CoreDNS's cache plus the interval at which a
// discovering http upstream (the gateway's) resolves the name again. The
// preStop sleep must cover it.
const callerLag = coreDNSTTL + jhttp.DefaultResolveEvery

// manifests are examples/orders/k8s/*.yaml, each decoded into its k8s.io/api
// type by kind.
type manifests struct {
	deployment *appsv1.Deployment
	services   map[string]*corev1.Service
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	pdb        *policyv1.PodDisruptionBudget
	adapter    *corev1.ConfigMap // prometheus-adapter's rules
}

// decodeStrict decodes a YAML manifest into out, refusing unknown and
// duplicated fields: a misspelt key (timeoutSecond) would otherwise be dropped
// silently here and by kubectl apply's client side alike.
func decodeStrict(data []byte, out any) error {
	return yaml.UnmarshalStrict(data, out)
}

func readManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("k8s", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in k8s/ (%v)", err)
	}
	m := manifests{services: map[string]*corev1.Service{}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(data, &tm); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			m.deployment = new(appsv1.Deployment)
			obj = m.deployment
		case "v1 Service":
			obj = new(corev1.Service)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			m.hpa = new(autoscalingv2.HorizontalPodAutoscaler)
			obj = m.hpa
		case "policy/v1 PodDisruptionBudget":
			m.pdb = new(policyv1.PodDisruptionBudget)
			obj = m.pdb
		case "v1 ConfigMap":
			m.adapter = new(corev1.ConfigMap)
			obj = m.adapter
		default:
			t.Fatalf("%s: no test reads a %s %s; add it to readManifests", f, tm.APIVersion, tm.Kind)
		}
		if err := decodeStrict(data, obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if s, ok := obj.(*corev1.Service); ok {
			m.services[s.Name] = s
		}
	}
	if m.deployment == nil || m.hpa == nil || m.pdb == nil || m.adapter == nil {
		t.Fatal("k8s/ lacks the Deployment, the HorizontalPodAutoscaler, the PodDisruptionBudget or the adapter's ConfigMap")
	}
	return m
}

// TestManifestsDecodeStrictly shows the strict decoding refuses what a
// lenient one would drop.
func TestManifestsDecodeStrictly(t *testing.T) {
	t.Parallel()
	readManifests(t)
	var d appsv1.Deployment
	err := decodeStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  replicas: 3\n  replica: 2\n"), &d)
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("an unknown field was accepted: %v", err)
	}
}

// podEnv returns the literal environment of the orders container, as the
// service would see it in its pod. Variables taken from a Secret are left
// out: they are deploy keys (a DSN, a secret), never a timeout.
func podEnv(c corev1.Container) []string {
	var env []string
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return env
}

// podConfig loads the [app] table the orders binary would run with in the
// pod: the configuration text through the framework's loader, with the
// container's environment.
func podConfig(t *testing.T, text string, c corev1.Container) framework.AppConfig {
	t.Helper()
	opts := service.Options()
	opts.ConfigText = text
	opts.Environ = podEnv(c)
	opts.LogOutput = io.Discard
	app, err := framework.New(opts)
	if err != nil {
		t.Fatalf("the pod's configuration is refused: %v", err)
	}
	return app.Config()
}

func seconds(n int32) time.Duration { return time.Duration(n) * time.Second }

// disagreements lists where the Deployment and the service's configuration
// disagree.
func disagreements(cfg framework.AppConfig, d *appsv1.Deployment) []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		return []string{fmt.Sprintf("the pod has %d containers, want 1", len(spec.Containers))}
	}
	c := spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	listenPort := func(key, addr, name string) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil || port != fmt.Sprint(ports[name]) {
			add("app.%s %q does not listen on the container port %q (%d)", key, addr, name, ports[name])
		}
	}
	listenPort("listen", cfg.Listen, "http")
	listenPort("admin_listen", cfg.AdminListen, "admin")

	probe := func(name string, p *corev1.Probe, path string) *corev1.Probe {
		switch {
		case p == nil || p.HTTPGet == nil:
			add("%s probe: missing, or not an HTTP GET", name)
			return nil
		case p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http":
			add("%s probe: GET %s on port %s, want %s on http", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
		}
		return p
	}
	probe("liveness", c.LivenessProbe, "/live")
	if p := probe("readiness", c.ReadinessProbe, "/ready"); p != nil {
		if need := cfg.ReadinessTimeout + readyOverHTTP; seconds(p.TimeoutSeconds) < need {
			add("readiness probe: timeoutSeconds %d is shorter than readiness_timeout (%s) + %s over HTTP: set it to at least %d",
				p.TimeoutSeconds, cfg.ReadinessTimeout, readyOverHTTP, int32((need+time.Second-1)/time.Second))
		}
	}

	var preStop time.Duration
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		add("no preStop sleep")
	} else {
		preStop = seconds(int32(c.Lifecycle.PreStop.Sleep.Seconds))
		if preStop < callerLag {
			add("preStop sleeps %s, less than the %s callers take to stop choosing the replica", preStop, callerLag)
		}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		add("terminationGracePeriodSeconds unset (30 s)")
	} else if need := preStop + cfg.DrainDelay + cfg.ShutdownTimeout + cfg.PluginStopTimeout; seconds(int32(*spec.TerminationGracePeriodSeconds)) < need {
		add("terminationGracePeriodSeconds %d is shorter than preStop (%s) + drain_delay (%s) + shutdown_timeout (%s) + plugin_stop_timeout (%s): set it to at least %d",
			*spec.TerminationGracePeriodSeconds, preStop, cfg.DrainDelay, cfg.ShutdownTimeout, cfg.PluginStopTimeout, int64(need/time.Second))
	}
	return out
}

// The Deployment's probes, grace period and preStop agree with jfast.toml;
// a readiness_timeout, shutdown_timeout or drain_delay that outgrows them
// fails.
func TestManifestsAgreeWithConfig(t *testing.T) {
	t.Parallel()
	m := readManifests(t)
	text, err := os.ReadFile("jfast.toml")
	if err != nil {
		t.Fatal(err)
	}
	c := m.deployment.Spec.Template.Spec.Containers[0]
	if problems := disagreements(podConfig(t, string(text), c), m.deployment); len(problems) > 0 {
		t.Fatalf("k8s/deployment.yaml disagrees with jfast.toml:\n%s", strings.Join(problems, "\n"))
	}

	for _, tt := range []struct{ key, from, to, want string }{
		{"readiness_timeout", `readiness_timeout = "800ms"`, `readiness_timeout = "2s"`, "readiness probe: timeoutSeconds 1"},
		{"shutdown_timeout", `shutdown_timeout = "20s"`, `shutdown_timeout = "45s"`, "terminationGracePeriodSeconds 40"},
		{"drain_delay", `shutdown_timeout = "20s"`, "shutdown_timeout = \"20s\"\ndrain_delay = \"15s\"", "terminationGracePeriodSeconds 40"},
	} {
		changed := strings.Replace(string(text), tt.from, tt.to, 1)
		if changed == string(text) {
			t.Fatalf("jfast.toml no longer holds %s; update this test", tt.from)
		}
		problems := strings.Join(disagreements(podConfig(t, changed, c), m.deployment), "\n")
		if !strings.Contains(problems, tt.want) {
			t.Errorf("with %s the disagreement is not found; got %q", tt.to, problems)
		}
	}
}

// The Services, the autoscaler and the disruption budget point at the
// Deployment's pods.
func TestManifestsPointAtTheDeployment(t *testing.T) {
	t.Parallel()
	m := readManifests(t)
	d := m.deployment
	pods := labels.Set(d.Spec.Template.Labels)
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || !sel.Matches(pods) {
		t.Fatalf("the Deployment's selector does not select its pods (%v)", err)
	}
	for _, name := range []string{"orders", "orders-instances"} {
		s := m.services[name]
		if s == nil {
			t.Fatalf("no Service %s", name)
		}
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(pods) || len(s.Spec.Selector) == 0 {
			t.Errorf("Service %s does not select the orders pods", name)
		}
		for _, p := range s.Spec.Ports {
			if p.TargetPort.String() != "http" {
				t.Errorf("Service %s port %s targets %s, want http", name, p.Name, p.TargetPort.String())
			}
		}
	}
	if s := m.services["orders-instances"]; s.Spec.ClusterIP != corev1.ClusterIPNone || s.Spec.PublishNotReadyAddresses {
		t.Errorf("orders-instances must be headless and list ready pods only: clusterIP %q, publishNotReadyAddresses %v", s.Spec.ClusterIP, s.Spec.PublishNotReadyAddresses)
	}
	if ref := m.hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name {
		t.Errorf("the autoscaler scales %s %s, want Deployment %s", ref.Kind, ref.Name, d.Name)
	}
	if min := m.hpa.Spec.MinReplicas; min == nil || *min < 2 {
		t.Error("the autoscaler may scale orders down to one replica")
	}
	if sel, err := metav1.LabelSelectorAsSelector(m.pdb.Spec.Selector); err != nil || !sel.Matches(pods) {
		t.Errorf("the disruption budget does not select the orders pods (%v)", err)
	}
}

// adapterRules is the part of prometheus-adapter's configuration the test
// reads.
type adapterRules struct {
	Rules []struct {
		SeriesQuery  string `json:"seriesQuery"`
		MetricsQuery string `json:"metricsQuery"`
		Name         struct {
			As string `json:"as"`
		} `json:"name"`
	} `json:"rules"`
}

var metricName = regexp.MustCompile(`jfast_[a-z_]+`)

// Every custom metric the autoscaler scales on comes from an adapter rule,
// and every jfast metric the rules query is one a jfast service exports.
func TestAutoscalerMetricsExist(t *testing.T) {
	t.Parallel()
	m := readManifests(t)
	var rules adapterRules
	if err := yaml.Unmarshal([]byte(m.adapter.Data["config.yaml"]), &rules); err != nil || len(rules.Rules) == 0 {
		t.Fatalf("the adapter's rules do not read: %v", err)
	}
	made := map[string]bool{}
	queried := map[string]bool{}
	for _, r := range rules.Rules {
		made[r.Name.As] = true
		for _, n := range metricName.FindAllString(r.SeriesQuery+" "+r.MetricsQuery, -1) {
			queried[n] = true
		}
	}
	pods := 0
	for _, metric := range m.hpa.Spec.Metrics {
		if metric.Type != autoscalingv2.PodsMetricSourceType {
			continue
		}
		pods++
		if !made[metric.Pods.Metric.Name] {
			t.Errorf("the autoscaler scales on %s, which no adapter rule makes", metric.Pods.Metric.Name)
		}
	}
	if pods == 0 {
		t.Fatal("the autoscaler scales on no metric of the service")
	}
	// A name is exported when the App's registry refuses a second,
	// different descriptor of it (counters without samples included).
	svc := jfasttest.Start(t, jfasttest.Options{})
	for name := range queried {
		probe := probeCollector{prometheus.NewDesc(name, "probe", []string{"probe"}, nil)}
		if err := svc.Metrics().Register(probe); err == nil {
			svc.Metrics().Unregister(probe)
			t.Errorf("the adapter queries %s, which a jfast service does not export", name)
		}
	}
}

type probeCollector struct{ d *prometheus.Desc }

func (p probeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- p.d }
func (p probeCollector) Collect(chan<- prometheus.Metric)    {}
