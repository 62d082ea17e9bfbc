package storage_test

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/jfastframework/jfast/plugins/storage"
)

// The benchmarks stream 50 MiB objects to and from a versitygw on loopback and
// report the bytes allocated per operation (-benchmem): memory stays flat when
// that figure is a small fraction of the object. The bare-SDK baselines run in
// the same process against the same server.
//
//	go test -run '^$' -bench . -benchmem ./plugins/storage/

const benchSize = 50 << 20

// zeros is a non-seekable body of n bytes that costs nothing to produce.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), z.left)
	clear(p[:n])
	z.left -= n
	return int(n), nil
}

func benchDisk(b *testing.B, toml func(endpoint, bucket string) string) (*storage.Disk, *s3Server, string) {
	srv := sharedS3(b)
	bucket := srv.newBucket(b)
	return start(b, toml(srv.Endpoint, bucket), "files", nil).disk, srv, bucket
}

func s3Disk(endpoint, bucket string) string { return s3TOML(endpoint, bucket) }

func BenchmarkS3Put50MiBKnownSize(b *testing.B) {
	d, _, _ := benchDisk(b, s3Disk)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Put(context.Background(), "bench", storage.Sized(&zeros{benchSize}, benchSize), ""); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkS3Put50MiBUnknownSize(b *testing.B) {
	d, _, _ := benchDisk(b, s3Disk)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Put(context.Background(), "bench", &zeros{benchSize}, ""); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkS3Get50MiB(b *testing.B) {
	d, _, _ := benchDisk(b, s3Disk)
	if err := d.Put(context.Background(), "bench", storage.Sized(&zeros{benchSize}, benchSize), ""); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 32<<10)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		obj, err := d.Get(context.Background(), "bench")
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.CopyBuffer(io.Discard, obj, buf); err != nil || n != benchSize {
			b.Fatal(n, err)
		}
		obj.Close()
	}
}

// bareClient is the SDK as a hand-written service would use it: the defaults
// config.LoadDefaultConfig gives (checksums when supported), no deadlines, no
// breaker.
func bareClient(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
	})
}

// The bare SDK cannot stream a body of unknown provenance over plain HTTP; it
// gets the whole object in memory (allocated before the timer) and hashes it.
func BenchmarkS3Put50MiBBareSDKFromMemory(b *testing.B) {
	_, srv, bucket := benchDisk(b, s3Disk)
	c := bareClient(srv.Endpoint)
	data := make([]byte, benchSize)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("bench"), Body: bytes.NewReader(data)}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkS3Get50MiBBareSDK(b *testing.B) {
	d, srv, bucket := benchDisk(b, s3Disk)
	if err := d.Put(context.Background(), "bench", storage.Sized(&zeros{benchSize}, benchSize), ""); err != nil {
		b.Fatal(err)
	}
	c := bareClient(srv.Endpoint)
	buf := make([]byte, 32<<10)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("bench")})
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.CopyBuffer(io.Discard, out.Body, buf); err != nil || n != benchSize {
			b.Fatal(n, err)
		}
		out.Body.Close()
	}
}

func BenchmarkLocalPut50MiB(b *testing.B) {
	d := start(b, localTOML(b.TempDir()), "files", nil).disk
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Put(context.Background(), "bench", &zeros{benchSize}, ""); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLocalGet50MiB(b *testing.B) {
	d := start(b, localTOML(b.TempDir()), "files", nil).disk
	if err := d.Put(context.Background(), "bench", &zeros{benchSize}, ""); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 32<<10)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		obj, err := d.Get(context.Background(), "bench")
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.CopyBuffer(io.Discard, obj, buf); err != nil || n != benchSize {
			b.Fatal(n, err)
		}
		obj.Close()
	}
}

// The interleaved benchmarks run the plugin and the bare SDK once each per
// iteration, in alternating order, and report the median time of each side and
// their ratio: on a shared 2-core machine two benchmarks run one after the other
// disagree by ±50 %, interleaved medians move together.
//
//	go test -run '^$' -bench Interleaved -benchtime 8x -count 3 ./plugins/storage/

func BenchmarkS3GetInterleaved(b *testing.B) {
	d, srv, bucket := benchDisk(b, s3Disk)
	ctx := context.Background()
	if err := d.Put(ctx, "bench", storage.Sized(&zeros{benchSize}, benchSize), ""); err != nil {
		b.Fatal(err)
	}
	c := bareClient(srv.Endpoint)
	buf := make([]byte, 32<<10)
	plugin := func() {
		obj, err := d.Get(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.CopyBuffer(io.Discard, obj, buf); err != nil || n != benchSize {
			b.Fatal(n, err)
		}
		obj.Close()
	}
	bare := func() {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("bench")})
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.CopyBuffer(io.Discard, out.Body, buf); err != nil || n != benchSize {
			b.Fatal(n, err)
		}
		out.Body.Close()
	}
	interleave(b, bare, plugin)
}

// Put: the plugin streams a body it never holds (known size, not seekable); the
// bare SDK needs the whole object in memory over plain HTTP (a bytes.Reader it
// can hash and rewind), allocated once outside the timer.
func BenchmarkS3PutInterleaved(b *testing.B) {
	d, srv, bucket := benchDisk(b, s3Disk)
	ctx := context.Background()
	c := bareClient(srv.Endpoint)
	data := make([]byte, benchSize)
	plugin := func() {
		if err := d.Put(ctx, "plugin", storage.Sized(&zeros{benchSize}, benchSize), ""); err != nil {
			b.Fatal(err)
		}
	}
	bare := func() {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("bare"), Body: bytes.NewReader(data)}); err != nil {
			b.Fatal(err)
		}
	}
	interleave(b, bare, plugin)
}

func interleave(b *testing.B, bare, plugin func()) {
	var bareT, pluginT []time.Duration
	timed := func(f func(), into *[]time.Duration) {
		t0 := time.Now()
		f()
		*into = append(*into, time.Since(t0))
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			timed(bare, &bareT)
			timed(plugin, &pluginT)
		} else {
			timed(plugin, &pluginT)
			timed(bare, &bareT)
		}
		i++
	}
	mb, mp := median(bareT), median(pluginT)
	b.ReportMetric(float64(mb.Milliseconds()), "bare-ms")
	b.ReportMetric(float64(mp.Milliseconds()), "plugin-ms")
	b.ReportMetric(float64(mp)/float64(mb), "plugin/bare")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
