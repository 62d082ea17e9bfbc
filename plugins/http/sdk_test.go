package http_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/requestid"
)

// A real SDK through the upstream's RoundTripper: aws-sdk-go-v2's S3 client
// against a versitygw process (scripts/install-versitygw.sh), with the SDK's
// own retries off so that the upstream's are the only ones.
func TestSDKThroughTransport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := drills.StartS3(ctx)
	if err != nil {
		t.Fatalf("S3-compatible server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })

	clk := jfasttest.NewClock()
	clk.SetAutoAdvance(true)
	var (
		attempts atomic.Int64
		mu       sync.Mutex
		ids      []string
	)
	c, err := jhttp.NewClient(noBudget(jhttp.Upstream{
		Name: "s3", BaseURL: srv.Endpoint(),
		// Room for 3 MiB under -race on a loaded machine; the paused S3
		// below is still cut by the read gap, well within the total.
		ReadTimeout:  time.Second,
		PolicyConfig: resilience.PolicyConfig{Timeout: 10 * time.Second, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 2}},
	}), jhttp.WithClock(clk), jhttp.WithTransportWrapper(func(_ string, rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			attempts.Add(1)
			mu.Lock()
			ids = append(ids, r.Header.Get("X-Request-Id"))
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	sdk := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint()), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
		HTTPClient:  c.HTTPClient(),
		Retryer:     aws.NopRetryer{}, // retry at one level: the upstream's
	})
	bucket := "jfast-sdk"
	rctx := requestid.NewContext(ctx, "req-sdk-1")
	if _, err := sdk.CreateBucket(rctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	object := make([]byte, 3<<20)
	_, _ = rand.Read(object)
	if _, err := sdk.PutObject(rctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("a.bin"), Body: bytes.NewReader(object)}); err != nil {
		t.Fatalf("put: %v", err)
	}
	got, err := sdk.GetObject(rctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("a.bin")})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if n := c.InFlight(); n != 1 {
		t.Errorf("in flight while the object streams = %d, want 1", n)
	}
	b, err := io.ReadAll(got.Body)
	_ = got.Body.Close()
	if err != nil || !bytes.Equal(b, object) {
		t.Fatalf("get: %d bytes, %v; want the %d bytes put", len(b), err, len(object))
	}
	if n := c.InFlight(); n != 0 {
		t.Errorf("in flight after the body = %d, want 0", n)
	}
	mu.Lock()
	for i, id := range ids {
		if id != "req-sdk-1" {
			t.Errorf("attempt %d carried X-Request-Id %q, want req-sdk-1", i, id)
		}
	}
	mu.Unlock()
	if n := attempts.Load(); n != 3 {
		t.Errorf("%d requests for 3 operations", n)
	}

	// S3 hangs: the GET is an UpstreamTimeout the SDK returns wrapped, after
	// one attempt cut by the 1 s read gap: nothing answered since it was sent,
	// so its hang opens the breaker at once (the silence rule) and no retry
	// pays the read gap again; the next GET fails at once, unsent.
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	before := attempts.Load()
	_, err = sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("a.bin")})
	var to *jhttp.UpstreamTimeout
	if !errors.As(err, &to) {
		t.Fatalf("get against a paused S3: err = %v, want an UpstreamTimeout inside the SDK's error", err)
	}
	if p, ok := problem.As(err); !ok || p.Status != 503 || p.Extensions["upstream"] != "s3" {
		t.Errorf("the SDK's error renders as %+v, want a 503 naming s3", p)
	}
	if n := attempts.Load() - before; n != 1 {
		t.Errorf("%d requests for a GET against a paused S3, want 1 (no retry after the hang)", n)
	}
	before = attempts.Load()
	_, err = sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("a.bin")})
	if !errors.Is(err, resilience.ErrOpen) {
		t.Fatalf("second get: err = %v, want the open breaker", err)
	}
	if attempts.Load() != before {
		t.Error("a request was sent through an open breaker")
	}

	// S3 is back: after the cool-down one probe closes the breaker.
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	clk.Advance(resilience.DefaultBreakerCoolDown)
	got, err = sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("a.bin")})
	if err != nil {
		t.Fatalf("probe after the cool-down: %v", err)
	}
	_, _ = io.Copy(io.Discard, got.Body)
	_ = got.Body.Close()
	if s := c.Breaker().Snapshot().State; s != resilience.StateClosed {
		t.Errorf("breaker %s after a good probe, want closed", s)
	}
}
