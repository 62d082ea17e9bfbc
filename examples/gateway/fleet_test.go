package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/examples/internal/exampletest"
	inventory "github.com/jfastframework/jfast/examples/inventory/service"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// The fleet drill: three replicas of examples/orders and two of
// examples/billing as real processes, behind this gateway (every replica
// listed in its upstreams' instances), on private databases of the
// machine's PostgreSQL and a private Redis; examples/inventory in-process.
// Under a steady load of GETs and keyed POSTs through the gateway it
// kills one orders replica with SIGKILL, then restarts every orders replica
// in turn with SIGTERM; then it sends one Idempotency-Key to two replicas
// at once, and checks that an event published by one replica reaches a
// stream opened on another. docs/drills.md has the table.
func TestFleetDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet drill builds and runs six processes")
	}
	f := startFleet(t)
	ada := exampletest.Token(t, "ada")
	sku := f.newSKU(t, 1_000_000, 250)

	// One order to read back throughout.
	first := f.post(f.gateway, sku, "fleet-first", ada)
	if first.status != http.StatusCreated {
		t.Fatalf("the first order: %d %s", first.status, first.body)
	}

	var steps []fleetStep
	loadBefore := loadavg()

	// (a) kill -9 one orders replica under load.
	load := f.startLoad(ada, sku, first.id)
	time.Sleep(2 * time.Second) // load before
	f.orders[1].kill(t)
	time.Sleep(3 * time.Second) // load after, the dead replica still listed
	steps = append(steps, load.stop("kill -9 orders-2"))

	// (b) a rolling restart: SIGTERM each replica, start it again, wait
	// for its /ready, then the next.
	f.orders[1].start(t)
	f.orders[1].waitReady(t)
	f.waitGatewayUses(t, f.orders[1])
	load = f.startLoad(ada, sku, first.id)
	for _, o := range f.orders {
		// As an orchestrator waits for a new replica's readiness before it
		// stops the next: here until the gateway's health check has seen it
		// answer and its breaker is closed.
		o.term(t)
		o.start(t)
		o.waitReady(t)
		f.waitGatewayUses(t, o)
	}
	steps = append(steps, load.stop("rolling restart (SIGTERM, /ready, next)"))

	t.Logf("machine load (1-minute average) %s before the steps, %s after", loadBefore, loadavg())
	for _, s := range steps {
		t.Logf("%-40s requests %4d  errors %d  p99 %s  gateway retries %d  POSTs resent after 409 %d  %s", s.name, s.requests, len(s.errors), s.p99.Round(time.Millisecond), s.retries, s.resent, strings.Join(s.errors[:min(len(s.errors), 3)], "; "))
		if len(s.errors) > 0 {
			t.Errorf("%s: %d of %d requests failed: %s", s.name, len(s.errors), s.requests, strings.Join(s.errors[:min(len(s.errors), 5)], "; "))
		}
	}
	f.checkChargedOnce(t)

	// (c) one Idempotency-Key sent at once to two different replicas.
	var wg sync.WaitGroup
	answers := make([]answer, 2)
	for i, o := range []*process{f.orders[0], f.orders[2]} {
		wg.Go(func() { answers[i] = f.post("http://"+o.addr, sku, "fleet-concurrent", ada) })
	}
	wg.Wait()
	// Each is the order (201) or, when it met the other's charge still
	// running at billing, a 409 with Retry-After whose retry is the order.
	var ids []int64
	for i, a := range answers {
		t.Logf("one key to two replicas: %d (order %d, Retry-After %q) %.300s", a.status, a.id, a.retryAfter, a.body)
		if a.status == http.StatusConflict && a.retryAfter != "" {
			a = f.post("http://"+f.orders[2*i].addr, sku, "fleet-concurrent", ada)
			t.Logf("its retry: %d (order %d) %.300s", a.status, a.id, a.body)
		}
		if a.status != http.StatusCreated {
			t.Errorf("one key to two replicas: %d %s, want the order", a.status, a.body)
		}
		ids = append(ids, a.id)
	}
	if n := f.ordersWithKey(t, "fleet-concurrent"); n != 1 {
		t.Errorf("one Idempotency-Key made %d orders", n)
	}
	if ids[0] != ids[1] {
		t.Errorf("the two answers name different orders: %d and %d", ids[0], ids[1])
	}
	f.checkChargedOnce(t)

	// (d) an event published by one replica reaches a stream on another.
	lines := exampletest.Events(t, "http://"+f.orders[0].addr+"/events", "Authorization", "Bearer "+ada)
	paid := f.post("http://"+f.orders[2].addr, sku, "fleet-event", ada)
	if paid.status != http.StatusCreated {
		t.Fatalf("POST on orders-3: %d %s", paid.status, paid.body)
	}
	if !waitEvent(lines, paid.id, 10*time.Second) {
		t.Errorf("order %d's event, published on orders-3, did not reach the stream on orders-1", paid.id)
	}
}

// healthEvery is how often the gateway asks each orders replica's /ready
// in the drill.
const healthEvery = time.Second

// waitGatewayUses waits until the gateway's /ready shows the replica's last
// health check passed and its breaker closed: the gateway picks it again.
// Within three health rounds (each at most health_every plus
// DefaultHealthTimeout); else the test fails with what /ready says.
func (f *fleet) waitGatewayUses(t *testing.T, p *process) {
	t.Helper()
	within := 3 * (healthEvery + jhttp.DefaultHealthTimeout)
	var last string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ready struct {
			Checks map[string]struct {
				Meta struct {
					Upstreams map[string]struct {
						Instances map[string]struct {
							Health  string `json:"health"`
							Breaker struct {
								State string `json:"state"`
							} `json:"breaker"`
						} `json:"instances"`
					} `json:"upstreams"`
				} `json:"meta"`
			} `json:"checks"`
		}
		resp, err := http.Get(f.gateway + "/ready")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		last = string(b)
		if json.Unmarshal(b, &ready) != nil {
			continue
		}
		in, ok := ready.Checks["http"].Meta.Upstreams["orders"].Instances[p.addr]
		if ok && in.Health == "pass" && (in.Breaker.State == "" || in.Breaker.State == "closed") {
			return
		}
	}
	t.Fatalf("the gateway does not use %s again within %s; its /ready: %.2000s", p.name, within, last)
}

// fleet is the running fleet.
type fleet struct {
	gateway  string // http://127.0.0.1:P
	orders   []*process
	billing  []*process
	ordersDB string
	billDB   string
	stock    *inventory.Store
}

// process is one replica: a binary with its environment, on a fixed port so
// it can be started again at the same address.
type process struct {
	name, bin, dir, addr string
	env                  []string
	log                  *os.File
	cmd                  *exec.Cmd
	exited               chan struct{}
	exitErr              error // the last run's, once exited is closed
}

func (p *process) start(t *testing.T) {
	t.Helper()
	p.cmd = exec.Command(p.bin)
	p.cmd.Dir = p.dir // no jfast.toml there: the binary runs its compiled-in configuration
	p.cmd.Env = append(p.env, "JFAST_APP_LISTEN="+p.addr)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.exited = make(chan struct{})
	cmd, exited := p.cmd, p.exited
	go func() {
		p.exitErr = cmd.Wait()
		close(exited)
	}()
}

// waitReady waits until the replica's /ready answers 200, or fails with
// its log when it exits first or takes more than 60 s.
func (p *process) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			t.Fatalf("%s exited before it was ready:\n%s", p.name, p.tail())
		default:
		}
		resp, err := http.Get("http://" + p.addr + "/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not ready within 60s:\n%s", p.name, p.tail())
}

func (p *process) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// term stops the replica gracefully and waits for it to exit: with status
// 0 and no request cut by the drain (the App logs each one it cuts).
func (p *process) term(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30s of SIGTERM:\n%s", p.name, p.tail())
	}
	if p.exitErr != nil {
		t.Errorf("%s exited after SIGTERM with %v:\n%s", p.name, p.exitErr, p.tail())
	}
	if b, _ := os.ReadFile(p.log.Name()); strings.Contains(string(b), "shutdown cut") {
		t.Errorf("%s's drain cut requests:\n%s", p.name, p.tail())
	}
}

func (p *process) tail() string {
	b, _ := os.ReadFile(p.log.Name())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := drills.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// build compiles the examples into dir with one go build, so their shared
// packages are compiled once and in parallel, and returns their paths.
func build(t *testing.T, dir string, names ...string) []string {
	t.Helper()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	var bins []string
	for _, n := range names {
		args = append(args, "../"+n)
		bins = append(bins, filepath.Join(dir, n))
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bins
}

// loadavg is the machine's load: /proc/loadavg's 1-minute average, and the
// number of CPUs, for the figures' context.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%s on %d CPUs", strings.Fields(string(b))[0], runtime.NumCPU())
}

// startRedis starts a private redis-server until the test ends.
func startRedis(t *testing.T) string {
	t.Helper()
	r, err := drills.StartRedis(context.Background())
	if err != nil {
		t.Skipf("no private redis-server: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r.URL()
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	dir := t.TempDir()
	bins := build(t, dir, "orders", "billing")
	ordersBin, billingBin := bins[0], bins[1]
	f := &fleet{stock: inventory.NewStore(nil)}
	var err error
	var drop func() error
	if f.ordersDB, drop, err = exampletest.Database("jfast_fleet_orders"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drop() })
	if f.billDB, drop, err = exampletest.Database("jfast_fleet_billing"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drop() })
	redisURL := startRedis(t)

	// inventory, in-process: orders reserves stock through it over gRPC.
	p := jgrpc.New()
	jfasttest.Start(t, jfasttest.Options{
		TOML:    exampletest.Config(t, "../inventory/jfast.toml", `listen = "127.0.0.1:9020"`, `listen = "127.0.0.1:0"`),
		Plugins: []framework.Plugin{p},
		Routes:  inventory.Routes(f.stock),
	})

	replica := func(kind, bin string, n int, env []string) *process {
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.log", kind, n)))
		if err != nil {
			t.Fatal(err)
		}
		pr := &process{name: fmt.Sprintf("%s-%d", kind, n), bin: bin, dir: t.TempDir(), addr: freeAddr(t), env: env, log: log}
		t.Cleanup(func() {
			if pr.cmd != nil {
				_ = pr.cmd.Process.Kill()
				<-pr.exited
			}
			_ = log.Close()
		})
		return pr
	}
	for n := range 2 {
		f.billing = append(f.billing, replica("billing", billingBin, n+1, []string{"JFAST_DB_URL=" + f.billDB}))
	}
	var billingURLs []string
	for _, b := range f.billing {
		billingURLs = append(billingURLs, "http://"+b.addr)
	}
	ordersEnv := []string{
		"JFAST_DB_URL=" + f.ordersDB,
		"JFAST_CACHE_URL=" + redisURL,
		"JFAST_GRPC_UPSTREAMS__INVENTORY__TARGET=" + p.Addr(),
		"JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL=" + billingURLs[0],
		"JFAST_HTTP_UPSTREAMS__BILLING__INSTANCES=" + strings.Join(billingURLs, ","),
		"JFAST_STORAGE_DISKS__RECEIPTS__ROOT=" + t.TempDir(),
		// A stopping replica answers /ready 503 and keeps serving for one
		// health round of the gateway (health_every plus health_timeout)
		// before its listener closes: the gateway's check ejects it first.
		"JFAST_APP_DRAIN_DELAY=" + (healthEvery + jhttp.DefaultHealthTimeout).String(),
	}
	for n := range 3 {
		f.orders = append(f.orders, replica("orders", ordersBin, n+1, ordersEnv))
	}
	// The first of each runs the migrations alone.
	for _, group := range [][]*process{f.billing, f.orders} {
		group[0].start(t)
		group[0].waitReady(t)
		for _, pr := range group[1:] {
			pr.start(t)
		}
		for _, pr := range group[1:] {
			pr.waitReady(t)
		}
	}

	var ordersURLs []string
	for _, o := range f.orders {
		ordersURLs = append(ordersURLs, "http://"+o.addr)
	}
	gw := startGatewayEnv(t,
		// The drill is of replicas failing, not of overload (which has
		// drills of its own): the gateway runs in this test's process,
		// which shares two cores with the six replicas and whatever else
		// the machine runs, and on a starved machine the latency of a
		// replica's death made its adaptive limit fall to the floor (2)
		// and shed the drill's 4 workers. A floor above them keeps the
		// front door out of this drill's counts.
		"JFAST_APP_OVERLOAD__MIN_LIMIT=16",
		"JFAST_HTTP_UPSTREAMS__ORDERS__BASE_URL="+ordersURLs[0],
		"JFAST_HTTP_UPSTREAMS__ORDERS__INSTANCES="+strings.Join(ordersURLs, ","),
		// Readiness-driven ejection: each replica's /ready asked every
		// second; one that does not answer is skipped, one that answers
		// again gets its breaker closed.
		"JFAST_HTTP_UPSTREAMS__ORDERS__HEALTH_PATH=/ready",
		"JFAST_HTTP_UPSTREAMS__ORDERS__HEALTH_EVERY="+healthEvery.String(),
		"JFAST_HTTP_UPSTREAMS__ORDERS_EVENTS__BASE_URL="+ordersURLs[0],
		"JFAST_HTTP_UPSTREAMS__ORDERS_EVENTS__INSTANCES="+strings.Join(ordersURLs, ","),
		"JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL="+billingURLs[0],
		"JFAST_HTTP_UPSTREAMS__BILLING__INSTANCES="+strings.Join(billingURLs, ","))
	f.gateway = "http://" + gw.Addr()
	return f
}

// newSKU adds a SKU to orders' catalogue and the inventory.
func (f *fleet) newSKU(t *testing.T, available int, price int64) string {
	t.Helper()
	sku := fmt.Sprintf("fleet-%d", time.Now().UnixNano())
	f.exec(t, f.ordersDB, `INSERT INTO stock (sku, price_minor) VALUES ($1, $2)`, sku, price)
	f.stock.Set(sku, int64(available))
	return sku
}

// query runs one statement on the database at url.
func query(t *testing.T, url string, run func(ctx context.Context, c *pgx.Conn) error) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := run(ctx, c); err != nil {
		t.Fatal(err)
	}
}

func (f *fleet) exec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	query(t, url, func(ctx context.Context, c *pgx.Conn) error { _, err := c.Exec(ctx, sql, args...); return err })
}

func count(t *testing.T, url, sql string, args ...any) (n int) {
	t.Helper()
	query(t, url, func(ctx context.Context, c *pgx.Conn) error { return c.QueryRow(ctx, sql, args...).Scan(&n) })
	return n
}

func (f *fleet) ordersWithKey(t *testing.T, key string) int {
	return count(t, f.ordersDB, `SELECT count(*) FROM orders WHERE idempotency_key = $1`, key)
}

// checkChargedOnce: every order is paid, and billing holds exactly one
// payment per invoice, one invoice per order.
func (f *fleet) checkChargedOnce(t *testing.T) {
	t.Helper()
	orders := count(t, f.ordersDB, `SELECT count(*) FROM orders`)
	unpaid := count(t, f.ordersDB, `SELECT count(*) FROM orders WHERE status <> 'paid'`)
	invoices := count(t, f.billDB, `SELECT count(*) FROM invoices`)
	twice := count(t, f.billDB, `SELECT count(*) FROM (SELECT invoice_id FROM payments GROUP BY invoice_id HAVING count(*) > 1) d`)
	payments := count(t, f.billDB, `SELECT count(*) FROM payments`)
	t.Logf("orders %d (unpaid %d), invoices %d, payments %d, invoices paid twice %d", orders, unpaid, invoices, payments, twice)
	if unpaid != 0 || invoices != orders || payments != orders || twice != 0 {
		t.Errorf("not every order charged exactly once: orders %d (unpaid %d), invoices %d, payments %d, paid twice %d", orders, unpaid, invoices, payments, twice)
	}
}

type answer struct {
	status     int
	id         int64
	body       string
	retryAfter string
}

// post places an order for sku with key at base (the gateway's /api or a
// replica's own /orders).
func (f *fleet) post(base, sku, key, token string) answer {
	path := "/orders"
	if base == f.gateway {
		path = "/api/orders"
	}
	body := fmt.Sprintf(`{"sku":%q,"quantity":1,"email":"ada@example.com"}`, sku)
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{body: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil { // the answer cut mid-way
		return answer{body: fmt.Sprintf("%d, then the body cut: %v", resp.StatusCode, err)}
	}
	var o struct {
		ID int64 `json:"id"`
	}
	_ = json.Unmarshal(b, &o)
	return answer{status: resp.StatusCode, id: o.ID, body: string(b), retryAfter: resp.Header.Get("Retry-After")}
}

// load is a steady load of GETs and keyed POSTs through the gateway.
type load struct {
	f       *fleet
	retries int // the gateway's retries to orders when the load started
	stopc   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	took    []time.Duration
	errors  []string
	keys    atomic.Int64
	// conflicts counts the keyed POSTs sent again after a 409 with
	// Retry-After (see postKeyed).
	conflicts atomic.Int64
}

type fleetStep struct {
	name     string
	requests int
	errors   []string
	p99      time.Duration
	retries  int // the gateway's retries to orders during the step
	resent   int // keyed POSTs sent again after a 409 with Retry-After
}

func (f *fleet) startLoad(token, sku string, order int64) *load {
	l := &load{stopc: make(chan struct{}), f: f, retries: f.retries()}
	client := &http.Client{Timeout: 30 * time.Second}
	record := func(what string, start time.Time, status int, err error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.took = append(l.took, time.Since(start))
		switch {
		case err != nil:
			l.errors = append(l.errors, what+": "+err.Error())
		case status >= 300:
			l.errors = append(l.errors, fmt.Sprintf("%s: %d", what, status))
		}
	}
	for w := range 4 {
		l.wg.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond) // 20 requests/s per worker, 80 in all
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-l.stopc:
					return
				case <-tick.C:
				}
				start := time.Now()
				if w == 0 && i%2 == 0 { // one request in eight is a keyed POST
					key := fmt.Sprintf("fleet-load-%d", l.keys.Add(1))
					a := l.postKeyed(sku, key, token)
					var err error
					if a.status == 0 {
						err = fmt.Errorf("%s", a.body)
					}
					record("POST "+key, start, a.status, err)
					continue
				}
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/api/orders/%d", f.gateway, order), nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				status, what := 0, "GET"
				if err == nil {
					var b []byte
					b, err = io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					status = resp.StatusCode
					var got struct {
						Order struct {
							ID int64 `json:"id"`
						} `json:"order"`
					}
					switch {
					case err != nil:
						err = fmt.Errorf("%d, then the body cut: %w", status, err)
					case status >= 300:
						what += " " + string(b[:min(len(b), 200)])
					case json.Unmarshal(b, &got) != nil || got.Order.ID != order:
						err = fmt.Errorf("%d but not order %d: %.200s", status, order, b)
					}
				}
				record(what, start, status, err)
			}
		})
	}
	return l
}

// postKeyed places an order with key through the gateway as a client of
// the Idempotency-Key protocol does: a 409 with Retry-After (the order's
// charge still running at billing, sent by a replica that was killed
// mid-charge) is sent again with the same key after Retry-After, within
// billing's request_timeout (30 s: how long that first charge can run);
// its answer is the step's. Each such retry is counted.
func (l *load) postKeyed(sku, key, token string) answer {
	a := l.f.post(l.f.gateway, sku, key, token)
	for deadline := time.Now().Add(30 * time.Second); a.status == http.StatusConflict && a.retryAfter != "" && time.Now().Before(deadline); {
		l.conflicts.Add(1)
		secs, err := strconv.Atoi(a.retryAfter)
		if err != nil {
			return answer{body: fmt.Sprintf("409 with Retry-After %q, not a number of seconds", a.retryAfter)}
		}
		time.Sleep(time.Duration(secs) * time.Second) // the wait the server asked for
		a = l.f.post(l.f.gateway, sku, key, token)
	}
	return a
}

func (l *load) stop(name string) fleetStep {
	close(l.stopc)
	l.wg.Wait()
	took := slices.Clone(l.took)
	slices.Sort(took)
	s := fleetStep{name: name, requests: len(took), errors: l.errors, retries: l.f.retries() - l.retries, resent: int(l.conflicts.Load())}
	if len(took) > 0 {
		s.p99 = took[len(took)*99/100]
	}
	return s
}

// retries reads the gateway's retries to orders from its /metrics
// (jfast_client_retries_total{dependency="orders"}).
func (f *fleet) retries() int {
	resp, err := http.Get(f.gateway + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "jfast_client_retries_total{") && strings.Contains(l, `dependency="orders"`) {
			var v float64
			if _, err := fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v); err == nil {
				n += int(v)
			}
		}
	}
	return n
}

// waitEvent reports whether a data line naming order arrives within d.
func waitEvent(lines <-chan string, order int64, d time.Duration) bool {
	timeout := time.After(d)
	want := fmt.Sprintf(`"id":%d,`, order)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return false
			}
			if strings.HasPrefix(l, "data: ") && strings.Contains(l, want) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}
