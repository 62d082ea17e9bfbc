package storage_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	testAccessKey = "jfast-test-access"
	testSecretKey = "jfast-test-secret-0123456789"
)

// s3Server is a versitygw process (posix backend) on a free loopback port,
// started by the tests and stopped by its pid.
type s3Server struct {
	Endpoint string
	cmd      *exec.Cmd
	dir      string
}

// versitygwPath finds the binary scripts/install-versitygw.sh installs.
func versitygwPath() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		for _, gp := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(gp, "bin", "versitygw")
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	return "", errors.New("versitygw is not installed (not in PATH nor in $(go env GOPATH)/bin): run scripts/install-versitygw.sh")
}

func startS3Server(dir string) (*s3Server, error) {
	bin, err := versitygwPath()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	for try := 0; try < 3; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(bin, "--port", addr, "--access", testAccessKey, "--secret", testSecretKey, "--quiet", "posix", data)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start versitygw: %w", err)
		}
		s := &s3Server{Endpoint: "http://" + addr, cmd: cmd, dir: dir}
		if s.waitReady(15 * time.Second) {
			return s, nil
		}
		s.stop() // the port was taken in between, or it did not come up: try another
	}
	b, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
	return nil, fmt.Errorf("versitygw did not start; its log:\n%s", b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits until versitygw itself answers HTTP on its port (a bare TCP
// connect can be fooled: another process may hold the port, or a dial can
// connect to itself), and gives up early if the process exited (it could not
// bind the port).
func (s *s3Server) waitReady(within time.Duration) bool {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && s.alive() {
		resp, err := client.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			if strings.Contains(strings.ToUpper(resp.Header.Get("Server")), "VERSITYGW") {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// alive reports whether the process runs (it is not a zombie waiting for Wait).
func (s *s3Server) alive() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// stop ends the process by its pid (resuming it first if a test paused it).
func (s *s3Server) stop() {
	if s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// pause stops the process and waits until every one of its threads is stopped:
// the signal is asynchronous, and a thread busy with a request would otherwise
// still answer it.
func (s *s3Server) pause(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP versitygw: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !s.stopped() {
		if time.Now().After(deadline) {
			t.Fatal("versitygw did not stop within 5s of SIGSTOP")
		}
		time.Sleep(time.Millisecond)
	}
}

// stopped reports whether every thread of the process is in state T (stopped).
func (s *s3Server) stopped() bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", s.cmd.Process.Pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// "pid (comm) S ...": the state follows the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

func (s *s3Server) resume(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT versitygw: %v", err)
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
