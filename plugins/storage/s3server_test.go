package storage_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/jfastframework/jfast/drills"
)

const (
	testAccessKey = drills.S3AccessKey
	testSecretKey = drills.S3SecretKey
)

// s3Server is a versitygw process (posix backend) on a free loopback port,
// started by the tests (drills.StartS3) and stopped by its pid.
type s3Server struct {
	Endpoint string
	srv      *drills.S3
}

// startS3Server starts versitygw; a missing binary is an error naming
// scripts/install-versitygw.sh. The server keeps its data in its own
// temporary directory, removed by stop.
func startS3Server(string) (*s3Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := drills.StartS3(ctx)
	if err != nil {
		return nil, err
	}
	return &s3Server{Endpoint: srv.Endpoint(), srv: srv}, nil
}

// stop ends the process by its pid (resuming it first if a test paused it).
func (s *s3Server) stop() { _ = s.srv.Stop() }

// pause stops the process and waits until every one of its threads is stopped.
func (s *s3Server) pause(t testing.TB) {
	t.Helper()
	if err := s.srv.Pause(); err != nil {
		t.Fatalf("pause versitygw: %v", err)
	}
}

func (s *s3Server) resume(t testing.TB) {
	t.Helper()
	if err := s.srv.Resume(); err != nil {
		t.Fatalf("resume versitygw: %v", err)
	}
}

// newBucket creates a bucket with a unique name on the server.
func (s *s3Server) newBucket(t testing.TB) string {
	t.Helper()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := "jfast-" + hex.EncodeToString(rnd[:])
	c := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, ""),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

var (
	sharedMu  sync.Mutex
	shared    *s3Server
	sharedErr error
	sharedDir string
)

// sharedS3 returns the versitygw process the s3 tests share (each with its own
// bucket), starting it on first use. A missing binary fails the test, naming
// the install script.
func sharedS3(t testing.TB) *s3Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		sharedDir, sharedErr = os.MkdirTemp("", "jfast-storage-s3-")
		if sharedErr == nil {
			shared, sharedErr = startS3Server(sharedDir)
		}
	}
	if sharedErr != nil {
		t.Fatalf("S3-compatible server: %v", sharedErr)
	}
	return shared
}

func stopSharedS3() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.stop()
		shared = nil
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
}

// privateS3 starts a versitygw process for one test (one the test may pause)
// and stops it by its pid when the test ends.
func privateS3(t testing.TB) *s3Server {
	t.Helper()
	s, err := startS3Server(t.TempDir())
	if err != nil {
		t.Fatalf("S3-compatible server: %v", err)
	}
	t.Cleanup(s.stop)
	return s
}
