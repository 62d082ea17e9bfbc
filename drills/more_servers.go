package drills

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The credentials of every S3 server StartS3 starts.
const (
	S3AccessKey = "jfast-drill-access"
	S3SecretKey = "jfast-drill-secret-0123456789"
)

// S3 is a private versitygw (posix backend) on a free loopback port.
type S3 struct {
	addr string
	process
	// AccessKey and SecretKey are the server's credentials: S3AccessKey and
	// S3SecretKey.
	AccessKey, SecretKey string
}

// goBinary finds a binary in PATH or in $(go env GOPATH)/bin, or names the
// script that installs it.
func goBinary(name, script string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, gp := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(gp, "bin", name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s is not installed (not in PATH nor in $(go env GOPATH)/bin): run %s", name, script)
}

// binaryAndDir finds the binary name (goBinary) and makes the temporary
// directory, named by pattern, of a server about to start from it.
func binaryAndDir(name, script, pattern string) (bin, dir string, err error) {
	if bin, err = goBinary(name, script); err != nil {
		return "", "", err
	}
	if dir, err = os.MkdirTemp("", pattern); err != nil {
		return "", "", err
	}
	return bin, dir, nil
}

// didNotStart removes the directory of a server that never became ready
// and returns the error that quotes its log (startLogged's server.log).
func didNotStart(name, dir string) error {
	b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
	os.RemoveAll(dir)
	return fmt.Errorf("%s did not start; its log:\n%s", name, b)
}

// StartS3 starts versitygw (installed by scripts/install-versitygw.sh) on a
// free port, with its data in a temporary directory.
func StartS3(ctx context.Context) (*S3, error) {
	bin, dir, err := binaryAndDir("versitygw", "scripts/install-versitygw.sh", "jfast-s3-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &S3{process: process{dir: dir}, AccessKey: S3AccessKey, SecretKey: S3SecretKey}
	for range 3 { // the free port can be taken in between: try another
		port, err := FreePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.addr = fmt.Sprintf("127.0.0.1:%d", port)
		if err := s.start(ctx, bin, func(c *http.Response) bool {
			return strings.Contains(strings.ToUpper(c.Header.Get("Server")), "VERSITYGW")
		}, "--port", s.addr, "--access", s.AccessKey, "--secret", s.SecretKey, "--quiet", "posix", data); err == nil {
			return s, nil
		}
	}
	return nil, didNotStart("versitygw", dir)
}

func (s *S3) start(ctx context.Context, bin string, ready func(*http.Response) bool, args ...string) error {
	cmd, err := startLogged(bin, s.dir, args...)
	if err != nil {
		return err
	}
	s.cmd = cmd
	if waitHTTP(ctx, cmd, "http://"+s.addr+"/", 15*time.Second, ready) {
		return nil
	}
	stopCmd(cmd)
	return errors.New("not ready")
}

// startLogged starts bin with its output appended to dir/server.log.
func startLogged(bin, dir string, args ...string) (*exec.Cmd, error) {
	log, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	return cmd, nil
}

// waitHTTP waits until url answers in a way ready accepts (a bare TCP connect
// can be fooled by another process on the port), giving up early if the
// process exited.
func waitHTTP(ctx context.Context, cmd *exec.Cmd, url string, within time.Duration, ready func(*http.Response) bool) bool {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil && processAlive(cmd.Process.Pid) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if ready(resp) {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// processAlive reports whether pid runs (and is not a zombie).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

func stopCmd(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Addr is "127.0.0.1:PORT".
func (s *S3) Addr() string { return s.addr }

// Endpoint is the server's base URL, for a storage disk's endpoint (path-style).
func (s *S3) Endpoint() string { return "http://" + s.addr }

// process is a server binary the harness started (startLogged), with its
// files in dir: S3 (versitygw) and SMTP (mailpit) pause, resume and stop
// through it.
type process struct {
	cmd *exec.Cmd
	dir string
}

// Pause stops the server and waits until every thread is stopped.
func (p *process) Pause() error { return stopAndWait(p.cmd.Process.Pid) }

// Resume undoes Pause.
func (p *process) Resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// Stop ends the server by its pid and removes its files.
func (p *process) Stop() error {
	stopCmd(p.cmd)
	return os.RemoveAll(p.dir)
}

// SMTP is a private mailpit: an SMTP server and the HTTP API that lists what it
// received, both on free loopback ports.
type SMTP struct {
	addr, api string
	process
}

// StartSMTP starts mailpit (installed by scripts/install-mailpit.sh) accepting
// any credentials, with its database in a temporary directory.
func StartSMTP(ctx context.Context) (*SMTP, error) {
	bin, dir, err := binaryAndDir("mailpit", "scripts/install-mailpit.sh", "jfast-smtp-")
	if err != nil {
		return nil, err
	}
	s := &SMTP{process: process{dir: dir}}
	for range 3 {
		sp, err1 := FreePort()
		hp, err2 := FreePort()
		if err := errors.Join(err1, err2); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.addr, s.api = fmt.Sprintf("127.0.0.1:%d", sp), fmt.Sprintf("127.0.0.1:%d", hp)
		cmd, err := startLogged(bin, dir, "--smtp", s.addr, "--listen", s.api,
			"--database", filepath.Join(dir, "mailpit.db"), "--smtp-auth-accept-any",
			"--smtp-auth-allow-insecure", "--disable-version-check")
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.cmd = cmd
		ok := waitHTTP(ctx, cmd, "http://"+s.api+"/api/v1/messages", 15*time.Second, func(r *http.Response) bool {
			return r.StatusCode == http.StatusOK
		})
		if ok {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := waitPort(wctx, s.addr)
			cancel()
			if err == nil {
				return s, nil
			}
		}
		stopCmd(cmd)
	}
	return nil, didNotStart("mailpit", dir)
}

// Addr is the SMTP address, "127.0.0.1:PORT".
func (s *SMTP) Addr() string { return s.addr }

// API is the base URL of mailpit's HTTP API (GET /api/v1/messages).
func (s *SMTP) API() string { return "http://" + s.api }

var (
	_ Server = (*Redis)(nil)
	_ Server = (*Postgres)(nil)
	_ Server = (*S3)(nil)
	_ Server = (*SMTP)(nil)
)
