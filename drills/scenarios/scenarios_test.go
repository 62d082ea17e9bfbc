package scenarios_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/storage"
)

// The scenarios run one after another (not in parallel) so their latencies are
// not each other's load. Their deadlines are shortened (hundreds of
// milliseconds instead of seconds, cool-downs of 1 s instead of 15-30 s) so the
// whole suite stays well under five minutes; docs/drills.md lists them.

// margin is what a request may take beyond its configured deadlines on a
// loaded 2-core machine running with -race.
const margin = 1500 * time.Millisecond

// coolDown is every breaker's cool-down in the drill configs.
const coolDown = "1s"

// okRoute answers 200 without touching any dependency.
func okRoute(w http.ResponseWriter, _ *http.Request) error {
	return framework.JSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// run runs d with progress in the test log, records its result and fails the
// test on a contract violation.
func run(t *testing.T, d *drills.Drill) drills.Result {
	t.Helper()
	d.Progress = testWriter{t}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := d.Run(ctx)
	record(r)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	t.Logf("%s/%s: first answer %s, %d paid a deadline (slowest %s), then p50 %s max %s, /ready %s, recovered in %s",
		r.Dependency, r.Fault, r.FirstAnswer, r.Paid, r.Slowest, r.AnsweredP50, r.AnsweredMax, r.Ready, r.Recover)
	return r
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// skip records a scenario that cannot run here and skips with the reason.
func skip(t *testing.T, dep, fault, reason string) {
	t.Helper()
	record(drills.Result{Dependency: dep, Fault: fault, Skipped: reason})
	t.Skip("SKIP: " + reason)
}

// --- PostgreSQL -----------------------------------------------------------

const dbTOML = `[plugin.db]
pool_size = 4
connect_timeout = "1s"
ping_timeout = "500ms"
breaker_failures = 3
breaker_cool_down = "` + coolDown + `"
`

func dbService(t *testing.T, url string) *jfasttest.Service {
	t.Helper()
	return jfasttest.Start(t, jfasttest.Options{
		// request_timeout 1 s: a statement on a connection used a moment
		// before the pause is not pinged and waits for it.
		TOML:    "[app]\nname = \"drill\"\nrequest_timeout = \"1s\"\n[plugins]\nenabled = [\"db\"]\n" + dbTOML,
		Plugins: []framework.Plugin{db.New()},
		Env:     map[string]string{"JFAST_DB_URL": url},
		Routes: func(app *framework.App, r chi.Router) error {
			d, err := db.Get(app)
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/db", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				var n int
				if err := d.QueryRow(r.Context(), "SELECT 1").Scan(&n); err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, n)
			}))
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
}

// warm opens a few pooled connections so the pause catches them idle: the
// hard case, where the pool hands out a connection the server no longer
// answers on.
func warm(t *testing.T, svc *jfasttest.Service, path string, n int) {
	t.Helper()
	done := make(chan string, n)
	for range n {
		go func() {
			resp, err := http.Get(svc.URL + path)
			if err != nil {
				done <- err.Error()
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				done <- fmt.Sprintf("%d %s", resp.StatusCode, b)
				return
			}
			done <- ""
		}()
	}
	for range n {
		if s := <-done; s != "" {
			t.Fatalf("warming %s: %s", path, s)
		}
	}
}

func dbDrill(svc *jfasttest.Service, fault string, take, give func() error) *drills.Drill {
	return &drills.Drill{
		Dependency: "db", Fault: fault, BaseURL: svc.URL,
		Route: "/db", Other: "/plain", Want: http.StatusServiceUnavailable,
		NameValue: "db", Check: "db",
		// A statement on a just-used connection: request_timeout (1 s); a
		// ping (500 ms) and its replacement (250 ms); a connect (1 s).
		Deadline: 1500*time.Millisecond + margin,
		Take:     take, Give: give,
	}
}

// TestDrillPostgresPaused pauses a private cluster for real: the postmaster
// and every backend, so the pooled sessions stop answering too.
func TestDrillPostgresPaused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := drills.StartPostgres(ctx)
	if err != nil {
		t.Fatalf("private PostgreSQL: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	svc := dbService(t, srv.URL("postgres"))
	t.Cleanup(func() { srv.Resume() }) // before the App stops
	warm(t, svc, "/db", 4)
	run(t, dbDrill(svc, "pause (SIGSTOP postmaster + backends)", srv.Pause, srv.Resume))
}

// TestDrillPostgresRefused: the machine's PostgreSQL behind a proxy that stops
// listening (nothing there: refused at once).
func TestDrillPostgresRefused(t *testing.T) {
	p, err := drills.StartProxy("127.0.0.1:5432")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	svc := dbService(t, "postgres://postgres@"+p.Addr()+"/test?sslmode=disable")
	t.Cleanup(func() { p.Pass() })
	warm(t, svc, "/db", 4)
	run(t, dbDrill(svc, "refuse (proxy)", p.Refuse, p.Pass))
}

// TestDrillPostgresUserContainer pauses the user's own container.
func TestDrillPostgresUserContainer(t *testing.T) {
	c, url, reason := drills.UserContainer("PG")
	if c == nil {
		skip(t, "db", "docker pause (your container)", reason)
	}
	svc := dbService(t, url)
	t.Cleanup(func() { c.Resume() })
	warm(t, svc, "/db", 4)
	run(t, dbDrill(svc, "docker pause "+c.Name, c.Pause, c.Resume))
}

// --- Redis ----------------------------------------------------------------

const cacheTOML = `[plugin.cache]
command_timeout = "300ms"
breaker_failures = 3
breaker_cool_down = "` + coolDown + `"
`

func cacheService(t *testing.T, url string) *jfasttest.Service {
	t.Helper()
	var computed atomic.Int64
	return jfasttest.Start(t, jfasttest.Options{
		TOML:    "[app]\nname = \"drill\"\n[plugins]\nenabled = [\"cache\"]\n" + cacheTOML,
		Plugins: []framework.Plugin{cache.New()},
		Env:     map[string]string{"JFAST_CACHE_URL": url},
		Routes: func(app *framework.App, r chi.Router) error {
			c, err := cache.From(app)
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/cache", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				if err := c.Set(r.Context(), "k", []byte("v"), time.Minute); err != nil {
					return err
				}
				v, _, err := c.Get(r.Context(), "k")
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, string(v))
			}))
			// Remember fails open: the value is computed when Redis cannot answer.
			r.Method(http.MethodGet, "/remember", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				v, err := cache.RememberJSON(r.Context(), c, "r", time.Minute, func(context.Context) (int64, error) {
					return computed.Add(1), nil
				})
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, v)
			}))
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
}

func cacheDrill(svc *jfasttest.Service, route, fault string, take, give func() error) *drills.Drill {
	want := http.StatusServiceUnavailable
	if route == "/remember" {
		want = http.StatusOK
	}
	return &drills.Drill{
		Dependency: "cache", Fault: fault, BaseURL: svc.URL,
		Route: route, Other: "/plain", Want: want, NameValue: "cache", Check: "cache",
		Deadline: 2*300*time.Millisecond + margin, // /cache sends two commands
		Take:     take, Give: give,
	}
}

func TestDrillRedisPaused(t *testing.T) {
	srv, err := drills.StartRedis(context.Background())
	if err != nil {
		t.Fatalf("private redis-server: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	svc := cacheService(t, srv.URL())
	t.Cleanup(func() { srv.Resume() })
	run(t, cacheDrill(svc, "/cache", "pause (SIGSTOP)", srv.Pause, srv.Resume))
}

// TestDrillRedisPausedRemember: Remember fails open, so the route keeps
// answering 200 (computing the value) while Redis is paused.
func TestDrillRedisPausedRemember(t *testing.T) {
	srv, err := drills.StartRedis(context.Background())
	if err != nil {
		t.Fatalf("private redis-server: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	svc := cacheService(t, srv.URL())
	t.Cleanup(func() { srv.Resume() })
	d := cacheDrill(svc, "/remember", "pause (SIGSTOP), Remember", srv.Pause, srv.Resume)
	d.Deadline = 300*time.Millisecond + margin // one GET, then the value is computed
	run(t, d)
}

func TestDrillRedisUserContainer(t *testing.T) {
	c, url, reason := drills.UserContainer("REDIS")
	if c == nil {
		skip(t, "cache", "docker pause (your container)", reason)
	}
	svc := cacheService(t, url)
	t.Cleanup(func() { c.Resume() })
	run(t, cacheDrill(svc, "/cache", "docker pause "+c.Name, c.Pause, c.Resume))
}

// TestDrillRedisDockerPause runs the machine's redis-server in a container of
// a private Docker engine (an image imported from a rootfs, no registry) and
// pauses it with docker pause, as a user would.
func TestDrillRedisDockerPause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := drills.StartEngine(ctx, ".") // the repository root is found upwards
	if err != nil {
		skip(t, "cache", "docker pause (private engine)", err.Error())
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stop the docker engine: %v", err)
		}
	})
	if err := e.BuildRedisImage(ctx); err != nil {
		t.Fatalf("build the redis image: %v", err)
	}
	c, addr, err := e.RunRedis(ctx, "jfast-drill-redis")
	if err != nil {
		t.Fatalf("run the redis container: %v", err)
	}
	svc := cacheService(t, "redis://"+addr+"/0")
	t.Cleanup(func() { c.Resume() })
	run(t, cacheDrill(svc, "/cache", "docker pause", c.Pause, c.Resume))

	// The same through RunService, what `jfast drill` calls: the container
	// named by its variable, db skipped because none is named for it.
	t.Setenv(drills.ContainerVar("REDIS"), c.Name)
	t.Setenv(drills.ContainerVar("PG"), "")
	var out strings.Builder
	res, err := drills.RunService(ctx, drills.ServiceOptions{
		BaseURL: svc.URL, Plugins: []string{"db", "cache"}, Route: "/cache", Other: "/plain",
		Deadline: 2*300*time.Millisecond + margin, DockerHost: e.Host(),
	}, &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Skipped != "JFAST_DRILL_PG_CONTAINER is not set" || res[1].Err != nil || res[1].Paid == 0 || res[1].Recover == 0 {
		t.Fatalf("RunService results: %+v", res)
	}
	if !strings.Contains(out.String(), "SKIP db: JFAST_DRILL_PG_CONTAINER names no container") {
		t.Fatalf("RunService printed no SKIP line for db:\n%s", out.String())
	}
}

// --- upstream HTTP ----------------------------------------------------------

// upstreamService starts an App whose /upstream route calls the upstream
// "billing", a local server behind a fault proxy.
func upstreamService(t *testing.T) (*jfasttest.Service, *drills.Proxy) {
	t.Helper()
	return proxied{
		plugins: []framework.Plugin{jhttp.New()},
		toml:    billingTOML,
		routes:  upstreamRoute,
	}.start(t, httpUpstream(t, http.HandlerFunc(paid)))
}

// upstreamRoute mounts /upstream, a GET of the upstream "billing"'s /invoice
// that answers its status, or the call's error.
func upstreamRoute(app *framework.App, r chi.Router) error {
	c, err := jhttp.Client(app, "billing")
	if err != nil {
		return err
	}
	r.Method(http.MethodGet, "/upstream", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		resp, err := c.Get(r.Context(), "/invoice")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return framework.JSON(w, http.StatusOK, resp.StatusCode)
	}))
	return nil
}

// billingTOML configures the upstream "billing" at addr.
func billingTOML(addr string) string {
	return `[plugin.http.upstreams.billing]
base_url = "http://` + addr + `"
connect_timeout = "300ms"
read_timeout = "300ms"
timeout = "1s"
attempts = 2
breaker_failures = 3
breaker_cool_down = "` + coolDown + `"
`
}

// paid is the billing upstream's answer to every request.
func paid(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"paid":true}`)
}

var upstreamDrill = proxiedDrill{
	dependency: "http", route: "/upstream",
	nameKey: "upstream", nameValue: "billing", check: "http",
	deadline: time.Second + margin, // timeout
}.drill

func TestDrillUpstreamBlackhole(t *testing.T) {
	svc, p := upstreamService(t)
	run(t, upstreamDrill(svc, "blackhole (proxy)", p.Blackhole, p.Pass))
}

// TestDrillUpstreamLatency: every chunk delayed by twice the read timeout.
func TestDrillUpstreamLatency(t *testing.T) {
	svc, p := upstreamService(t)
	run(t, upstreamDrill(svc, "latency 600ms (proxy)", func() error { return p.Latency(600 * time.Millisecond) }, p.Pass))
}

// TestDrillUpstreamReset: every connection reset, old and new.
func TestDrillUpstreamReset(t *testing.T) {
	svc, p := upstreamService(t)
	run(t, upstreamDrill(svc, "reset (proxy)", p.Reset, p.Pass))
}

// --- JWKS issuer ------------------------------------------------------------

// issuer serves a JWK Set of EC P-256 keys.
type issuer struct {
	keys atomic.Value // []map[string]string
}

func ecJWK(kid string, k *ecdsa.PrivateKey) map[string]string {
	pub, err := k.PublicKey.ECDH()
	if err != nil {
		panic(err)
	}
	b := pub.Bytes() // 0x04 || X || Y
	enc := base64.RawURLEncoding.EncodeToString
	return map[string]string{"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig", "x": enc(b[1:33]), "y": enc(b[33:])}
}

func (is *issuer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"keys": is.keys.Load()})
}

func token(t *testing.T, kid string, k *ecdsa.PrivateKey) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "drill", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDrillJWKSIssuerBlackhole: with the issuer blackholed, a token whose key
// is cached keeps verifying (200) and a token signed by a key the service has
// not seen yet (the issuer rotated) answers 503 naming jwks.
func TestDrillJWKSIssuerBlackhole(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	is := &issuer{}
	is.keys.Store([]map[string]string{ecJWK("k1", k1)})
	svc, p := proxied{
		plugins: []framework.Plugin{auth.New()},
		toml: func(addr string) string {
			return `[plugin.auth]
mode = "jwks"
jwks_url = "http://` + addr + `/jwks.json"
jwks_timeout = "300ms"
breaker_cool_down = "` + coolDown + `"
jwks_min_refresh_interval = "100ms"
`
		},
		routes: func(app *framework.App, r chi.Router) error {
			a, err := auth.From(app)
			if err != nil {
				return err
			}
			r.With(a.RequireAuth()).Method(http.MethodGet, "/me", framework.Handler(okRoute))
			return nil
		},
	}.start(t, httpUpstream(t, is))
	old := []string{"Authorization", "Bearer " + token(t, "k1", k1)}
	if r := svc.Get(t, "/me", old...); r.Status != http.StatusOK {
		t.Fatalf("a token with a published key: %d %s", r.Status, r)
	}
	// The drill's request carries a token of the rotated key: Take publishes
	// it and blackholes the issuer, so the service cannot learn it yet.
	headers := []string{"Authorization", "Bearer " + token(t, "k1", k1)}
	rotated := "Bearer " + token(t, "k2", k2)
	run(t, &drills.Drill{
		Dependency: "auth", Fault: "JWKS issuer blackhole (proxy), rotated key", BaseURL: svc.URL,
		Route: "/me", Headers: headers, Other: "/plain", Want: http.StatusServiceUnavailable,
		NameValue: "jwks", Check: "auth",
		Deadline: 300*time.Millisecond + margin,
		Take: func() error {
			is.keys.Store([]map[string]string{ecJWK("k1", k1), ecJWK("k2", k2)})
			if err := p.Blackhole(); err != nil {
				return err
			}
			headers[1] = rotated // Drill reads Headers on every request
			// A cached key keeps verifying, without waiting on the issuer.
			start := time.Now()
			if r := svc.Get(t, "/me", old...); r.Status != http.StatusOK || time.Since(start) > margin {
				return fmt.Errorf("a token of a cached key while the issuer is away: %d after %s: %s", r.Status, time.Since(start), r)
			}
			return nil
		},
		Give: p.Pass,
	})
}

// --- S3 ---------------------------------------------------------------------

func TestDrillS3Paused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := drills.StartS3(ctx)
	if err != nil {
		t.Fatalf("private S3 server: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	bucket := "drill"
	c := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint()), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("hello.txt"), Body: strings.NewReader("hello")}); err != nil {
		t.Fatalf("put object: %v", err)
	}
	toml := `[app]
name = "drill"
[plugins]
enabled = ["storage"]
[plugin.storage.disks.files]
driver = "s3"
bucket = "drill"
region = "us-east-1"
endpoint = "` + srv.Endpoint() + `"
path_style = true
access_key = "` + srv.AccessKey + `"
secret_key = "` + srv.SecretKey + `"
connect_timeout = "300ms"
read_timeout = "300ms"
attempts = 2
breaker_failures = 3
breaker_cool_down = "` + coolDown + `"
`
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{storage.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			d, err := storage.For(app, "files")
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/file", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				obj, err := d.Get(r.Context(), "hello.txt")
				if err != nil {
					return err
				}
				defer obj.Close()
				b, err := io.ReadAll(obj)
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, string(b))
			}))
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
	t.Cleanup(func() { srv.Resume() })
	run(t, &drills.Drill{
		Dependency: "storage", Fault: "pause (SIGSTOP versitygw)", BaseURL: svc.URL,
		Route: "/file", Other: "/plain", Want: http.StatusServiceUnavailable,
		NameValue: "storage", Check: "storage",
		// One attempt's read gap (300 ms, to 9/8 of it): its hang, with
		// nothing answered meanwhile, opens the breaker and the policy's
		// loop makes no second attempt.
		Deadline: 300*time.Millisecond*9/8 + margin,
		Take:     srv.Pause, Give: srv.Resume,
	})
}

// --- SMTP -------------------------------------------------------------------

// TestDrillSMTPPaused pauses a private mailpit. Mail is sent from the queue,
// so the route that sends keeps answering 200 (the message waits in the queue:
// no breaker, no request latency); /ready reports mail degraded once a
// delivery attempt failed; after the resume every message enqueued before and
// during the outage is delivered.
func TestDrillSMTPPaused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, err := drills.StartPostgres(ctx)
	if err != nil {
		t.Fatalf("private PostgreSQL for the queue: %v", err)
	}
	t.Cleanup(func() { pg.Stop() })
	srv, err := drills.StartSMTP(ctx)
	if err != nil {
		t.Fatalf("private SMTP server: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	port := srv.Addr()[strings.LastIndexByte(srv.Addr(), ':')+1:]
	toml := `[app]
name = "drill"
[plugins]
enabled = ["db", "queue", "mail"]
[plugin.queue]
backend = "postgres"
retry_base = "50ms"
retry_max = "300ms"
poll_interval = "100ms"
enqueue_timeout = "1s"
attempts = 100
[plugin.queue.queues.mail]
concurrency = 2
[plugin.mail]
transport = "smtp"
host = "127.0.0.1"
port = ` + port + `
use_starttls = false
connect_timeout = "300ms"
command_timeout = "300ms"
from = "Drill <drill@example.com>"
queue = "mail"
`
	var sent atomic.Int64
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{db.New(), queue.New(), mail.New()},
		Env:     map[string]string{"JFAST_DB_URL": pg.URL("postgres")},
		Routes: func(app *framework.App, r chi.Router) error {
			m, err := mail.From(app)
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/mail", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				n := sent.Add(1)
				if err := m.Send(r.Context(), mail.Message{To: []string{"ada@example.com"}, Subject: fmt.Sprintf("drill %d", n), Text: "hello"}); err != nil {
					sent.Add(-1)
					return err
				}
				return framework.JSON(w, http.StatusOK, n)
			}))
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
	t.Cleanup(func() { srv.Resume() })
	delivered := func() int64 {
		resp, err := http.Get(srv.API() + "/api/v1/messages?limit=1")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var body struct {
			Total int64 `json:"total"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		return body.Total
	}
	// The first message is delivered before the fault: the check has a
	// successful last delivery to report.
	// The first enqueue applies River's migrations, which may outlast the
	// shortened enqueue_timeout on a loaded machine: retry it.
	waitUntil(t, 30*time.Second, "a first message enqueued", func() bool { return svc.Get(t, "/mail").Status == http.StatusOK })
	waitUntil(t, 30*time.Second, "the first message delivered", func() bool { return delivered() >= 1 })
	run(t, &drills.Drill{
		Dependency: "mail", Fault: "pause (SIGSTOP mailpit)", BaseURL: svc.URL,
		Route: "/mail", Other: "/plain", Want: http.StatusOK, Check: "mail",
		Deadline:    time.Second + margin, // an enqueue (enqueue_timeout): no SMTP in the request
		ReadyWithin: 30 * time.Second,
		Take:        srv.Pause, Give: srv.Resume,
	})
	// Nothing enqueued before or during the outage is lost.
	waitUntil(t, 60*time.Second, "every message delivered after the resume", func() bool { return delivered() == sent.Load() })
	t.Logf("%d messages sent, %d delivered", sent.Load(), delivered())
}

// waitUntil polls cond every 50 ms until it holds or within passes.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// --- queue ------------------------------------------------------------------

// queueService starts an App whose GET /enqueue enqueues a "drill" job and
// counts it, with a handler that counts the jobs run, and GET /plain. The queue
// plugin must be among plugins.
func queueService(t *testing.T, toml string, env map[string]string, plugins ...framework.Plugin) (*jfasttest.Service, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var enqueued, ran atomic.Int64
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: plugins,
		Env:     env,
		Routes: func(app *framework.App, r chi.Router) error {
			q, err := queue.From(app)
			if err != nil {
				return err
			}
			if err := queue.Handle(q, "drill", func(context.Context, int64) error { ran.Add(1); return nil }); err != nil {
				return err
			}
			r.Method(http.MethodGet, "/enqueue", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				if _, err := q.Enqueue(r.Context(), "drill", int64(1)); err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, enqueued.Add(1))
			}))
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
	return svc, &enqueued, &ran
}

// TestDrillQueueRedisPaused: the queue's redis backend (asynq, on the cache
// plugin's client) with a private redis-server paused. Enqueue answers 503
// naming the queue within its deadline; after the resume every job enqueued
// before the fault, and after, runs.
func TestDrillQueueRedisPaused(t *testing.T) {
	srv, err := drills.StartRedis(context.Background())
	if err != nil {
		t.Fatalf("private redis-server: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	toml := `[app]
name = "drill"
[plugins]
enabled = ["cache", "queue"]
` + cacheTOML + `
[plugin.queue]
backend = "redis"
enqueue_timeout = "500ms"
retry_base = "50ms"
retry_max = "300ms"
attempts = 100
[plugin.queue.queues.default]
concurrency = 2
`
	svc, enqueued, ran := queueService(t, toml, map[string]string{"JFAST_CACHE_URL": srv.URL()}, cache.New(), queue.New())
	t.Cleanup(func() { srv.Resume() })
	run(t, &drills.Drill{
		Dependency: "queue", Fault: "redis backend, pause (SIGSTOP)", BaseURL: svc.URL,
		Route: "/enqueue", Other: "/plain", Want: http.StatusServiceUnavailable,
		NameValue: "queue", Check: "queue",
		Deadline:    500*time.Millisecond + margin,
		ReadyWithin: 5 * time.Second,
		Take:        srv.Pause, Give: srv.Resume,
	})
	// At least every job whose enqueue answered 200 runs. More may: an
	// enqueue that answered 503 had sent its command to the paused server,
	// which carried it out once resumed: such a 503 matches
	// queue.ErrMaybeEnqueued, not queue.ErrNotEnqueued (docs/drills.md).
	waitUntil(t, 60*time.Second, "every enqueued job run after the resume", func() bool { return ran.Load() >= enqueued.Load() })
	t.Logf("%d jobs enqueued with a 200, %d ran", enqueued.Load(), ran.Load())
}

// TestDrillQueuePostgresPaused: the queue's postgres backend (River, on the db
// plugin's pool) with a private cluster paused, pooled sessions included.
func TestDrillQueuePostgresPaused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, err := drills.StartPostgres(ctx)
	if err != nil {
		t.Fatalf("private PostgreSQL: %v", err)
	}
	t.Cleanup(func() { pg.Stop() })
	toml := `[app]
name = "drill"
[plugins]
enabled = ["db", "queue"]
` + dbTOML + `
[plugin.queue]
backend = "postgres"
enqueue_timeout = "2s"
retry_base = "50ms"
retry_max = "300ms"
poll_interval = "100ms"
attempts = 100
[plugin.queue.queues.default]
concurrency = 2
`
	svc, enqueued, ran := queueService(t, toml, map[string]string{"JFAST_DB_URL": pg.URL("postgres")}, db.New(), queue.New())
	t.Cleanup(func() { pg.Resume() })
	// The first enqueue applies River's migrations; then warm the pool.
	waitUntil(t, 30*time.Second, "a first enqueue", func() bool { return svc.Get(t, "/enqueue").Status == http.StatusOK })
	warm(t, svc, "/enqueue", 4)
	run(t, &drills.Drill{
		Dependency: "queue", Fault: "postgres backend, pause (SIGSTOP postmaster + backends)", BaseURL: svc.URL,
		Route: "/enqueue", Other: "/plain", Want: http.StatusServiceUnavailable,
		NameValue: "queue", Check: "queue",
		// A pooled connection's ping (500 ms) and a connect (1 s), within
		// enqueue_timeout (2 s).
		Deadline:    2*time.Second + margin,
		ReadyWithin: 5 * time.Second,
		Take:        pg.Pause, Give: pg.Resume,
	})
	waitUntil(t, 60*time.Second, "every enqueued job run after the resume", func() bool { return ran.Load() >= enqueued.Load() })
	t.Logf("%d jobs enqueued with a 200, %d ran", enqueued.Load(), ran.Load())
}

// TestDrillQueueRabbitMQBlackhole: the queue's rabbitmq backend behind a fault
// proxy in front of the machine's RabbitMQ, blackholed (the broker hangs: the
// socket is open and nothing answers). Enqueue answers 503 naming the queue
// within its deadline, then at once; after the broker is back, publishing
// resumes on the same App and every job confirmed before and after runs.
// The exchange and queues are this test's own and deleted afterwards.
// consumeLost matches the log line of a consuming RabbitMQ connection lost.
var consumeLost = regexp.MustCompile(`msg="rabbitmq connection lost; reconnecting"[^\n]*role=consume`)

func TestDrillQueueRabbitMQBlackhole(t *testing.T) {
	proxy, err := drills.StartProxy("127.0.0.1:5672")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	id := fmt.Sprintf("%x", b)
	toml := fmt.Sprintf(`[app]
name = "drill"
[plugins]
enabled = ["queue"]
[plugin.queue]
backend = "rabbitmq"
enqueue_timeout = "1s"
retry_base = "50ms"
retry_max = "300ms"
attempts = 100
[plugin.queue.queues.drill%[1]s]
concurrency = 2
[plugin.queue.rabbitmq]
url = "amqp://guest:guest@%[2]s/"
exchange = "jt-drill-%[1]s"
queue_prefix = "jt."
heartbeat = "1s"
connect_timeout = "1s"
`, id, proxy.Addr())
	q := queue.New()
	svc, enqueued, ran := queueService(t, toml, nil, q)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = svc.App.Stop(ctx)
		deleteRabbitTopology(t, q)
	})
	defer func() { // also when run fails: the app's log says what the links and the breaker did
		if t.Failed() {
			t.Log(svc.Logs())
		}
	}()
	waitUntil(t, 30*time.Second, "a first enqueue", func() bool { return svc.Get(t, "/enqueue").Status == http.StatusOK })
	warm(t, svc, "/enqueue", 4)
	run(t, &drills.Drill{
		Dependency: "queue", Fault: "rabbitmq backend, blackhole (proxy)", BaseURL: svc.URL,
		Route: "/enqueue", Other: "/plain", Want: http.StatusServiceUnavailable,
		NameValue: "queue", Check: "queue",
		// A publish waits for its confirmation at most enqueue_timeout (1 s),
		// retried once within the same deadline.
		Deadline:      time.Second + margin,
		ReadyWithin:   5 * time.Second,
		RecoverWithin: 60 * time.Second,
		Take:          proxy.Blackhole,
		Give: func() error {
			// A blackhole drops the bytes in flight on connections already
			// open, which no network does to a live TCP stream: the
			// consuming connection can be left mid-frame and wait forever.
			// The broker is given back once that connection was seen lost
			// (its 1 s heartbeat missed), as after any real outage. The
			// hang opens the queue's breaker at once, so the blackhole may
			// otherwise last only the one enqueue_timeout.
			waitUntil(t, 30*time.Second, "the consuming connection seen lost", func() bool {
				return consumeLost.MatchString(svc.Logs())
			})
			return proxy.Pass()
		},
	})
	waitUntil(t, 60*time.Second, "every enqueued job run after the broker came back", func() bool { return ran.Load() >= enqueued.Load() })
	t.Logf("%d jobs enqueued with a 200, %d ran", enqueued.Load(), ran.Load())
}

// deleteRabbitTopology deletes the exchanges and queues the backend declared on
// the machine's RabbitMQ (only names this suite makes: "jt" prefixed).
func deleteRabbitTopology(t *testing.T, q *queue.Plugin) {
	tb, ok := q.Backend().(interface{ Topology() []string })
	if !ok {
		t.Errorf("backend %T does not list its topology", q.Backend())
		return
	}
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil {
		t.Errorf("clean up rabbitmq: %v", err)
		return
	}
	defer conn.Close()
	for _, n := range tb.Topology() {
		kind, name, _ := strings.Cut(n, ":")
		if !strings.HasPrefix(name, "jt") {
			t.Errorf("refusing to delete %s %s: not a test name", kind, name)
			continue
		}
		ch, err := conn.Channel()
		if err != nil {
			t.Errorf("clean up rabbitmq: %v", err)
			return
		}
		if kind == "queue" {
			_, err = ch.QueueDelete(name, false, false, false)
		} else {
			err = ch.ExchangeDelete(name, false, false)
		}
		if err != nil {
			t.Errorf("delete %s %s: %v", kind, name, err)
		}
		ch.Close()
	}
}
