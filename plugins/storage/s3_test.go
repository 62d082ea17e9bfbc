package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

// s3TOML is an s3 disk called "files" on a versitygw bucket.
func s3TOML(endpoint, bucket string, extra ...string) string {
	return fmt.Sprintf("[plugin.storage.disks.files]\ndriver = \"s3\"\nbucket = %q\nendpoint = %q\npath_style = true\naccess_key = %q\nsecret_key = %q\n%s\n",
		bucket, endpoint, testAccessKey, testSecretKey, strings.Join(extra, "\n"))
}

func startS3(t *testing.T, srv *s3Server, extra ...string) setup {
	t.Helper()
	return start(t, s3TOML(srv.Endpoint, srv.newBucket(t), extra...), "files", nil)
}

func TestS3RoundTrip(t *testing.T) {
	t.Parallel()
	d := startS3(t, sharedS3(t)).disk
	ctx := context.Background()
	if err := d.Put(ctx, "reports/2026/01.csv", strings.NewReader("a,b\n1,2\n"), "text/csv; charset=utf-8"); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "reports/2026-summary.txt", io.NopCloser(strings.NewReader("sum")), ""); err != nil {
		t.Fatal(err) // unknown size, smaller than a part: one request
	}
	if err := d.Put(ctx, "other/ä ü#?.bin", bytes.NewReader([]byte{0, 1, 2}), "application/x-test"); err != nil {
		t.Fatal(err)
	}
	body, info := readAll(t, d, "reports/2026/01.csv")
	if body != "a,b\n1,2\n" || info.Size != 8 || info.ContentType != "text/csv; charset=utf-8" || info.ETag == "" {
		t.Fatalf("get = %q %+v", body, info)
	}
	st, err := d.Stat(ctx, "reports/2026-summary.txt")
	if err != nil || st.Size != 3 || st.ContentType != "text/plain; charset=utf-8" {
		t.Fatalf("stat = %+v %v", st, err)
	}
	if body, _ := readAll(t, d, "other/ä ü#?.bin"); body != "\x00\x01\x02" {
		t.Fatalf("odd key body = %q", body)
	}
	if got := listKeys(t, d, "reports/2026"); strings.Join(got, ",") != "reports/2026-summary.txt,reports/2026/01.csv" {
		t.Fatalf("list = %v", got)
	}
	if got := listKeys(t, d, ""); len(got) != 3 {
		t.Fatalf("list all = %v", got)
	}
	if err := d.Delete(ctx, "reports/2026/01.csv"); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Exists(ctx, "reports/2026/01.csv"); ok || err != nil {
		t.Fatalf("exists after delete = %v %v", ok, err)
	}
	if _, err := d.Get(ctx, "reports/2026/01.csv"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("get missing = %v", err)
	}
	if _, err := d.Stat(ctx, "nope"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("stat missing = %v", err)
	}
	if err := d.Delete(ctx, "never-existed"); err != nil {
		t.Fatalf("delete missing = %v", err)
	}
	// Missing objects are answers, not failures: the breaker stays closed.
	if s := d.Breaker().Snapshot(); s.Consecutive != 0 || s.WindowFailures != 0 {
		t.Fatalf("breaker counted answers as failures: %+v", s)
	}
}

func TestS3ListPages(t *testing.T) {
	t.Parallel()
	s := startS3(t, sharedS3(t))
	d := s.disk
	storage.SetListPageSize(d, 10) // S3's pages are 1000 keys; 10 shows the paging with 25
	ctx := context.Background()
	const n = 25
	for i := range n {
		if err := d.Put(ctx, fmt.Sprintf("p/%04d", i), strings.NewReader("x"), ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Put(ctx, "q/0000", strings.NewReader("x"), ""); err != nil {
		t.Fatal(err)
	}
	got := listKeys(t, d, "p/")
	if len(got) != n || got[0] != "p/0000" || got[n-1] != fmt.Sprintf("p/%04d", n-1) {
		t.Fatalf("listed %d keys: %v", len(got), got)
	}
	// Stopping early stops fetching.
	count := 0
	for range d.List(ctx, "p/") {
		count++
		if count == 5 {
			break
		}
	}
	if count != 5 {
		t.Fatalf("count = %d", count)
	}
	// Three pages for the whole listing, one for the loop that stopped.
	if pages := counter(t, s, "jfast_storage_operations_total", "operation", "list"); pages != 4 {
		t.Fatalf("list requests = %v, want 4", pages)
	}
}

// counter sums a metric's samples whose label has the given value.
func counter(t *testing.T, s setup, name, label, value string) float64 {
	t.Helper()
	mfs, err := s.svc.App.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// pattern is a deterministic, non-seekable body of n bytes that hashes itself
// as it is read.
type pattern struct {
	rng  *rand.ChaCha8
	left int64
	sum  hashWriter
}

type hashWriter interface {
	io.Writer
	Sum([]byte) []byte
}

func newPattern(n int64, seed byte) *pattern {
	var s [32]byte
	s[0] = seed
	return &pattern{rng: rand.NewChaCha8(s), left: n, sum: sha256.New()}
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, _ := p.rng.Read(b)
	p.sum.Write(b[:n])
	p.left -= int64(n)
	return n, nil
}

func hashOf(t testing.TB, r io.Reader) ([]byte, int64) {
	t.Helper()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return h.Sum(nil), n
}

const bigSize = 50 << 20

// 50 MiB objects go up and come down as streams: with a known size as one
// request, with an unknown size as a multipart upload through one 8 MiB
// buffer; the bytes allocated stay far below the object's size.
func TestS3LargeObjectsStream(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	d := startS3(t, sharedS3(t)).disk
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		body  func(p *pattern) io.Reader
		limit uint64
	}{
		{"known size", func(p *pattern) io.Reader { return storage.Sized(p, bigSize) }, 8 << 20},
		{"unknown size", func(p *pattern) io.Reader { return p }, 24 << 20}, // one part buffer, at most
	} {
		p := newPattern(bigSize, 1)
		before := totalAlloc()
		if err := d.Put(ctx, "big/"+tc.name, tc.body(p), "application/octet-stream"); err != nil {
			t.Fatalf("%s: put: %v", tc.name, err)
		}
		putAlloc := totalAlloc() - before
		want := p.sum.Sum(nil)

		before = totalAlloc()
		obj, err := d.Get(ctx, "big/"+tc.name)
		if err != nil {
			t.Fatalf("%s: get: %v", tc.name, err)
		}
		got, n := hashOf(t, obj)
		obj.Close()
		getAlloc := totalAlloc() - before
		if n != bigSize || obj.Size != bigSize || !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes (size %d), hash match %v", tc.name, n, obj.Size, bytes.Equal(got, want))
		}
		t.Logf("%s: 50 MiB put allocated %.1f MiB, get allocated %.1f MiB", tc.name, mib(putAlloc), mib(getAlloc))
		if putAlloc > tc.limit || getAlloc > 8<<20 {
			t.Errorf("%s: memory is not flat: put allocated %.1f MiB, get %.1f MiB for a 50 MiB object", tc.name, mib(putAlloc), mib(getAlloc))
		}
	}
	if got := listKeys(t, d, "big/"); len(got) != 2 {
		t.Fatalf("list = %v", got)
	}
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

func TestS3PresignedURL(t *testing.T) {
	t.Parallel()
	d := startS3(t, sharedS3(t)).disk
	ctx := context.Background()
	if err := d.Put(ctx, "private/report 1.pdf", strings.NewReader("%PDF secret"), "application/pdf"); err != nil {
		t.Fatal(err)
	}
	u, err := d.TemporaryURL(ctx, "private/report 1.pdf", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	get := func(u string) (int, string, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Content-Type")
	}
	if status, body, ct := get(u); status != 200 || body != "%PDF secret" || ct != "application/pdf" {
		t.Fatalf("presigned GET = %d %q %q", status, body, ct)
	}
	i := strings.Index(u, "X-Amz-Signature=") + len("X-Amz-Signature=")
	c := byte('0')
	if u[i] == '0' {
		c = '1'
	}
	if status, body, _ := get(u[:i] + string(c) + u[i+1:]); status != http.StatusForbidden || strings.Contains(body, "secret") {
		t.Fatalf("tampered presigned GET = %d %q", status, body)
	}
	if status, _, _ := get(strings.Replace(u, "report%201.pdf", "other.pdf", 1)); status != http.StatusForbidden {
		t.Fatalf("presigned URL for another key = %d", status)
	}
	// Without a signature the private object is refused.
	if status, _, _ := get(u[:strings.Index(u, "?")]); status != http.StatusForbidden {
		t.Fatalf("unsigned GET = %d", status)
	}
	if _, err := d.TemporaryURL(ctx, "a", 8*24*time.Hour); err == nil {
		t.Fatal("a presigned URL over 7 days was accepted")
	}
	if _, err := d.URL("a"); !errors.Is(err, storage.ErrPrivate) {
		t.Fatalf("URL on a private disk = %v", err)
	}
}

func TestS3PublicURL(t *testing.T) {
	t.Parallel()
	srv := sharedS3(t)
	bucket := srv.newBucket(t)
	d := start(t, s3TOML(srv.Endpoint, bucket, `visibility = "public"`), "files", nil).disk
	if u, err := d.URL("a b/c.txt"); err != nil || u != srv.Endpoint+"/"+bucket+"/a%20b/c.txt" {
		t.Fatalf("URL = %q %v", u, err)
	}
	cdn := start(t, s3TOML(srv.Endpoint, bucket, `visibility = "public"`, `base_url = "https://cdn.example.com"`), "files", nil).disk
	if u, err := cdn.URL("a.txt"); err != nil || u != "https://cdn.example.com/a.txt" {
		t.Fatalf("URL with base_url = %q %v", u, err)
	}
}

// A slow upload that keeps sending is not cut by read_timeout: the deadline is
// the gap between bytes, not the transfer.
func TestS3SlowUploadIsNotCut(t *testing.T) {
	t.Parallel()
	d := startS3(t, sharedS3(t), `read_timeout = "300ms"`).disk
	body := &trickle{chunk: 16 << 10, chunks: 12, every: 100 * time.Millisecond} // 1.2 s, four gaps' worth
	start := time.Now()
	if err := d.Put(context.Background(), "slow", storage.Sized(body, 12*16<<10), ""); err != nil {
		t.Fatalf("slow upload was cut after %s: %v", time.Since(start), err)
	}
	if el := time.Since(start); el < time.Second {
		t.Fatalf("the upload took %s: the body did not trickle", el)
	}
	if st, err := d.Stat(context.Background(), "slow"); err != nil || st.Size != 12*16<<10 {
		t.Fatalf("stat = %+v %v", st, err)
	}
}

// trickle yields chunks of 'x' with a pause before each.
type trickle struct {
	chunk, chunks int
	every         time.Duration
	sent          int
	pending       int
}

func (r *trickle) Read(p []byte) (int, error) {
	if r.pending == 0 {
		if r.sent == r.chunks {
			return 0, io.EOF
		}
		time.Sleep(r.every)
		r.sent++
		r.pending = r.chunk
	}
	n := min(len(p), r.pending)
	for i := range n {
		p[i] = 'x'
	}
	r.pending -= n
	return n, nil
}

// A paused S3 (SIGSTOP: connections are accepted, nothing answers) costs an
// operation at most its deadlines. Its hang, with nothing answered meanwhile,
// opens the breaker at once (the silence rule, not breaker_failures): the
// next operation answers at once with a 503 naming storage, a probe after the
// cool-down that hangs again reopens it, /ready says degraded; once S3 is back
// and the cool-down has passed, the next operation succeeds on the same App.
func TestS3PausedServerDeadlineThenBreakerThenRecovery(t *testing.T) {
	t.Parallel()
	srv := privateS3(t)
	s := start(t, s3TOML(srv.Endpoint, srv.newBucket(t),
		`read_timeout = "400ms"`, `connect_timeout = "400ms"`, `attempts = 2`,
		`breaker_failures = 2`, `breaker_cool_down = "10s"`), "files", nil)
	d := s.disk
	ctx := context.Background()
	if err := d.Put(ctx, "k", strings.NewReader("v"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	srv.pause(t)
	paused := true
	defer func() {
		if paused {
			srv.resume(t)
		}
	}()

	// Each hung operation: one attempt's 400 ms gap (to 9/8 of it): its hang,
	// with nothing answered since it was admitted, opens the breaker, and the
	// policy's loop makes no retry (StopOpen) although attempts = 2.
	// The first is a 16 MiB upload (more than the socket buffers take: the
	// write side stalls, and the request fails with a write timeout or, when
	// the reader's gap fired first, a closed connection: a hang either way),
	// which opens the breaker; the second, after the cool-down, is the probe:
	// a download (the read side waits), which reopens it.
	big := make([]byte, 16<<20)
	for i := range 2 {
		t0 := time.Now()
		var err error
		if i == 0 {
			err = d.Put(ctx, "big", bytes.NewReader(big), "")
		} else {
			s.clock.Advance(10 * time.Second)
			_, err = d.Get(ctx, "k")
		}
		el := time.Since(t0)
		t.Logf("call %d on a paused S3 failed after %s: %v", i, el, err)
		var de *problem.DependencyError
		if !errors.As(err, &de) || de.Dependency != "storage" || errors.Is(err, resilience.ErrOpen) {
			t.Fatalf("call %d on a paused S3: %v", i, err)
		}
		if el < 400*time.Millisecond || el > 3*time.Second {
			t.Fatalf("call %d took %s, want about one read_timeout", i, el)
		}
		if snap := d.Breaker().Snapshot(); snap.State != resilience.StateOpen || snap.Opens != uint64(i+1) {
			t.Fatalf("after call %d on a paused S3 the breaker is %+v, want opened %d times", i, snap, i+1)
		}
	}

	// The breaker is open: no I/O, an immediate 503 with the time left.
	t0 := time.Now()
	_, err := d.Stat(ctx, "k")
	el := time.Since(t0)
	if el > 250*time.Millisecond { // no I/O: far below one read_timeout, with room for a loaded CI machine
		t.Fatalf("open breaker took %s", el)
	}
	t.Logf("the open breaker answered in %s", el)
	p, ok := problem.As(err)
	if !ok || p.Status != 503 || p.RetryAfter != 10*time.Second || p.Extensions["dependency"] != "storage" {
		t.Fatalf("open breaker error = %v (%+v)", err, p)
	}
	r := s.svc.Get(t, "/ready")
	if r.Status != 200 || !strings.Contains(r.String(), `"status":"degraded"`) || !strings.Contains(r.String(), `"state":"open"`) {
		t.Fatalf("/ready while open = %d %s", r.Status, r.Body)
	}
	if n := counter(t, s, "jfast_storage_operations_total", "outcome", "circuit_open"); n != 1 {
		t.Fatalf("operations the open breaker refused = %v", n)
	}
	if n := counter(t, s, "jfast_client_calls_total", "outcome", "circuit_open"); n != 1 {
		t.Fatalf("jfast_client_calls_total{outcome=circuit_open} = %v, want the operation the open breaker refused, in the words of every client plugin", n)
	}
	if g := gauge(t, s, "jfast_client_breaker_state", "plugin", "storage"); g != 1 {
		t.Fatalf("breaker state gauge = %v, want 1 (open)", g)
	}
	if !strings.Contains(s.svc.Logs(), "storage: breaker opened") {
		t.Fatalf("the opening was not logged:\n%s", s.svc.Logs())
	}

	// Back: after the cool-down one probe goes through and closes the breaker.
	srv.resume(t)
	paused = false
	s.clock.Advance(10 * time.Second)
	body, _ := readAll(t, d, "k")
	if body != "v" {
		t.Fatalf("after recovery = %q", body)
	}
	if st := d.Breaker().Snapshot().State.String(); st != "closed" {
		t.Fatalf("breaker after recovery = %s", st)
	}
	if g := gauge(t, s, "jfast_client_breaker_state", "plugin", "storage"); g != 0 {
		t.Fatalf("breaker state gauge after recovery = %v", g)
	}
	// The upload the pause cut short left nothing behind.
	if ok, err := d.Exists(ctx, "big"); ok || err != nil {
		t.Fatalf("the cut upload was stored: %v %v", ok, err)
	}
	if r := s.svc.Get(t, "/ready"); r.Status != 200 || !strings.Contains(r.String(), `"status":"ok"`) {
		t.Fatalf("/ready after recovery = %d %s", r.Status, r.Body)
	}
}

// Over HTTP, the open breaker is a 503 problem+json naming storage with
// Retry-After.
func TestS3OutageRendersAs503(t *testing.T) {
	t.Parallel()
	srv := privateS3(t)
	s := start(t, s3TOML(srv.Endpoint, srv.newBucket(t), `read_timeout = "300ms"`, `attempts = 1`, `breaker_failures = 1`),
		"files", func(d *storage.Disk, r chiRouter) {
			r.Get("/files/{key}", handlerGet(d))
		})
	srv.pause(t)
	defer srv.resume(t)
	first := s.svc.Get(t, "/files/a")
	second := s.svc.Get(t, "/files/a")
	for i, r := range []struct {
		status int
		body   string
		ra     string
		ct     string
	}{{first.Status, first.String(), first.Header.Get("Retry-After"), first.Header.Get("Content-Type")},
		{second.Status, second.String(), second.Header.Get("Retry-After"), second.Header.Get("Content-Type")}} {
		if r.status != 503 || !strings.Contains(r.body, `"dependency":"storage"`) || !strings.HasPrefix(r.ct, problem.ContentType) {
			t.Fatalf("response %d = %d %s", i, r.status, r.body)
		}
		if strings.Contains(r.body, "127.0.0.1") || strings.Contains(r.body, testSecretKey) {
			t.Fatalf("response %d leaks internals: %s", i, r.body)
		}
	}
	if second.Header.Get("Retry-After") != "15" {
		t.Fatalf("Retry-After = %q", second.Header.Get("Retry-After"))
	}
}

// Without access_key and secret_key the SDK's default chain is used: here the
// environment's AWS_* variables. The boot does no I/O either way.
func TestS3DefaultCredentialChain(t *testing.T) {
	// Not parallel: it sets the process environment the SDK reads.
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	srv := sharedS3(t)
	toml := fmt.Sprintf("[plugin.storage.disks.files]\ndriver = \"s3\"\nbucket = %q\nendpoint = %q\npath_style = true\n", srv.newBucket(t), srv.Endpoint)
	d := start(t, toml, "files", nil).disk
	if err := d.Put(context.Background(), "k", strings.NewReader("v"), ""); err != nil {
		t.Fatalf("put with the default chain: %v", err)
	}
	if body, _ := readAll(t, d, "k"); body != "v" {
		t.Fatalf("body = %q", body)
	}
}

// A body that fails mid-upload (a client that went away) stores nothing, leaves
// no multipart upload behind, and is not held against S3.
func TestS3FailingBodyIsNotAStorageFailure(t *testing.T) {
	t.Parallel()
	srv := sharedS3(t)
	bucket := srv.newBucket(t)
	d := start(t, s3TOML(srv.Endpoint, bucket, `breaker_failures = 1`), "files", nil).disk
	ctx := context.Background()
	gone := errors.New("client went away")
	for _, tc := range []struct {
		name string
		body io.Reader
	}{
		{"known size", storage.Sized(io.MultiReader(io.LimitReader(&zeros{1 << 30}, 1<<20), errReader{gone}), 4<<20)},
		{"unknown size, one part sent", io.MultiReader(io.LimitReader(&zeros{1 << 30}, 9<<20), errReader{gone})},
	} {
		err := d.Put(ctx, "partial", tc.body, "")
		var be *storage.BodyError
		var de *problem.DependencyError
		if !errors.As(err, &be) || !errors.Is(err, gone) || errors.As(err, &de) {
			t.Fatalf("%s: put = %v", tc.name, err)
		}
		if st, err := d.Stat(ctx, "partial"); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("%s: a partial object was stored: %+v %v", tc.name, st, err)
		}
	}
	if st := d.Breaker().Snapshot(); st.State.String() != "closed" || st.Consecutive != 0 {
		t.Fatalf("breaker = %+v", st)
	}
	// A caller that gives up mid-upload stores nothing either.
	cctx, cancel := context.WithCancel(ctx)
	reached := make(chan struct{})
	body := io.MultiReader(io.LimitReader(&zeros{1 << 30}, 1<<20), &blockUntil{ctx: cctx, reached: reached})
	var wg sync.WaitGroup
	wg.Go(func() {
		<-reached
		cancel()
	})
	err := d.Put(cctx, "cancelled", storage.Sized(body, 4<<20), "")
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled put = %v", err)
	}
	c := bareClient(srv.Endpoint)
	out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil || len(out.Uploads) != 0 {
		t.Fatalf("multipart uploads left: %v %v", out, err)
	}
	// Checked again last: a server may commit an upload after the client left.
	for _, key := range []string{"partial", "cancelled"} {
		if st, err := d.Stat(ctx, key); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("%s: a partial object was stored: %+v %v", key, st, err)
		}
	}
}

// blockUntil is a body that stops sending: it blocks until ctx ends, after
// closing reached.
type blockUntil struct {
	ctx     context.Context
	reached chan struct{}
}

func (b *blockUntil) Read([]byte) (int, error) {
	close(b.reached)
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

// Without the binary the s3 tests fail (they do not skip), naming the script
// that installs it.
func TestMissingVersitygwNamesTheInstallScript(t *testing.T) {
	// Not parallel: it empties PATH.
	t.Setenv("PATH", t.TempDir())
	_, err := startS3Server(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "scripts/install-versitygw.sh") {
		t.Fatalf("error = %v", err)
	}
}

// gauge returns the value of the one series of a gauge whose label has the
// given value.
func gauge(t *testing.T, s setup, name, label, value string) float64 {
	t.Helper()
	mfs, err := s.svc.App.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found []float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					found = append(found, m.GetGauge().GetValue())
				}
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d series of gauge %s with %s=%q, want one", len(found), name, label, value)
	}
	return found[0]
}

// A Sized body that is not the length it declares is a body that failed
// (a BodyError, 400), on s3 and on a local disk alike: nothing is stored and
// the breaker hears nothing. A short one used to fail as S3's fault (a 503
// the breaker counted, so one caller's reader opened the disk's breaker for
// everyone) and was stored short on a local disk; a long one was stored cut
// at the declared length on s3 while Put failed, and whole on a local disk.
// A seekable Sized body of the right length still goes, and is still sent
// again by a retry.
func TestSizedBodyOfAnotherLengthStoresNothing(t *testing.T) {
	t.Parallel()
	srv := sharedS3(t)
	disks := map[string]*storage.Disk{
		"s3":    start(t, s3TOML(srv.Endpoint, srv.newBucket(t), `breaker_failures = 1`), "files", nil).disk,
		"local": start(t, localTOML(t.TempDir()), "files", nil).disk,
	}
	ctx := context.Background()
	for name, d := range disks {
		for _, tc := range []struct {
			name string
			body io.Reader
			want string
		}{
			{"short", storage.Sized(strings.NewReader("abc"), 10), "ended after 3 of the 10 bytes"},
			{"long", storage.Sized(strings.NewReader("0123456789"), 3), "longer than the 3 bytes"},
			{"long, unsized reader", storage.Sized(io.MultiReader(strings.NewReader("0123456789")), 3), "longer than the 3 bytes"},
		} {
			err := d.Put(ctx, "mismatch", tc.body, "")
			var be *storage.BodyError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) || problem.From(err).Status != http.StatusBadRequest {
				t.Fatalf("%s, %s: put = %v; want a BodyError saying %q, 400", name, tc.name, err, tc.want)
			}
			if st, err := d.Stat(ctx, "mismatch"); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("%s, %s: an object was stored: %+v %v", name, tc.name, st, err)
			}
		}
		if b := d.Breaker(); b != nil {
			if st := b.Snapshot(); st.State.String() != "closed" || st.Consecutive != 0 {
				t.Fatalf("%s: breaker = %+v", name, st)
			}
		}
		f, err := os.CreateTemp(t.TempDir(), "body")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.WriteString("xx0123456789")
		_, _ = f.Seek(2, io.SeekStart)
		if err := d.Put(ctx, "exact", storage.Sized(f, 10), ""); err != nil {
			t.Fatalf("%s: exact put = %v", name, err)
		}
		_ = f.Close()
		if body, _ := readAll(t, d, "exact"); body != "0123456789" {
			t.Fatalf("%s: exact body = %q", name, body)
		}
	}
}

// A body whose producer stops when the caller gives up (an io.Pipe closed,
// without an error, on the caller's cancellation) stores nothing and gives
// the caller its context.Canceled, Sized or not, on s3 and local disks
// alike. A local disk used to store the part that arrived, and Put
// returned nil.
func TestBodyEndedByTheCallersCancellationStoresNothing(t *testing.T) {
	t.Parallel()
	srv := sharedS3(t)
	disks := map[string]*storage.Disk{
		"s3":    start(t, s3TOML(srv.Endpoint, srv.newBucket(t)), "files", nil).disk,
		"local": start(t, localTOML(t.TempDir()), "files", nil).disk,
	}
	for name, d := range disks {
		for _, n := range []int64{10, -1} {
			ctx, cancel := context.WithCancel(context.Background())
			pr, pw := io.Pipe()
			more := make(chan struct{})
			waiting := &readAfter{r: pr, after: 3, waiting: more}
			var wg sync.WaitGroup
			wg.Go(func() {
				_, _ = pw.Write([]byte("abc"))
				<-more // Put waits for more: the cancellation ends that wait
				cancel()
				_ = pw.Close()
			})
			err := d.Put(ctx, "given-up", storage.Sized(waiting, n), "")
			wg.Wait()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s, size %d: put = %v; want context.Canceled", name, n, err)
			}
			if st, err := d.Stat(context.Background(), "given-up"); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("%s, size %d: an object was stored: %+v %v", name, n, st, err)
			}
		}
	}
}

// readAfter reads r and closes waiting when a read begins after the first
// `after` bytes were read.
type readAfter struct {
	r       io.Reader
	after   int
	read    int
	waiting chan struct{}
}

func (w *readAfter) Read(p []byte) (int, error) {
	if w.read >= w.after && w.waiting != nil {
		close(w.waiting)
		w.waiting = nil
	}
	n, err := w.r.Read(p)
	w.read += n
	return n, err
}
