package drills

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is a dependency server the harness started itself, on a free loopback
// port, so drills can pause it without disturbing a server other suites share.
type Server interface {
	// Addr is "127.0.0.1:PORT".
	Addr() string
	// Pause makes the server stop answering while its sockets stay open
	// (SIGSTOP), including connections already established.
	Pause() error
	// Resume undoes Pause.
	Resume() error
	// Stop ends the server and removes its files.
	Stop() error
}

// FreePort returns a loopback port nothing listens on at the moment.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// portAndDir picks a free loopback port and makes a temporary directory
// (named by pattern, as os.MkdirTemp) for a server about to start.
func portAndDir(pattern string) (port int, dir string, err error) {
	if port, err = FreePort(); err != nil {
		return 0, "", err
	}
	if dir, err = os.MkdirTemp("", pattern); err != nil {
		return 0, "", err
	}
	return port, dir, nil
}

func waitPort(ctx context.Context, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not start listening: %w", addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Redis is a private redis-server.
type Redis struct {
	addr string
	dir  string
	pid  int
}

// StartRedis starts redis-server on a free port with persistence off.
func StartRedis(ctx context.Context) (*Redis, error) {
	port, dir, err := portAndDir("jfast-redis-")
	if err != nil {
		return nil, err
	}
	r := &Redis{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir}
	if err := r.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return r, nil
}

// start runs redis-server on r's port and directory and waits for its port.
func (r *Redis) start(ctx context.Context) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not installed: %w", err)
	}
	_, port, _ := strings.Cut(r.addr, ":")
	pidfile := filepath.Join(r.dir, "redis.pid")
	_ = os.Remove(pidfile)
	cmd := exec.CommandContext(ctx, bin, "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "yes", "--pidfile", pidfile, "--dir", r.dir,
		"--logfile", filepath.Join(r.dir, "redis.log"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("start redis-server: %v: %s", err, out)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitPort(wctx, r.addr); err != nil {
		return err
	}
	if r.pid, err = readPid(pidfile); err != nil {
		return err
	}
	return nil
}

func (r *Redis) Addr() string { return r.addr }

// URL is the redis:// URL of the server.
func (r *Redis) URL() string { return "redis://" + r.addr + "/0" }

// Pid is the redis-server process.
func (r *Redis) Pid() int { return r.pid }

// Pause stops redis-server (SIGSTOP) and waits until every thread is stopped.
func (r *Redis) Pause() error  { return stopAndWait(r.pid) }
func (r *Redis) Resume() error { return syscall.Kill(r.pid, syscall.SIGCONT) }

// Kill kills redis-server with SIGKILL, as a crash would: connections break at
// once and, persistence being off, everything it held is lost. Restart starts
// it again on the same port.
func (r *Redis) Kill() error {
	if err := syscall.Kill(r.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if allStopped(r.pid) || syscall.Kill(r.pid, 0) != nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("redis-server %d still runs 5s after SIGKILL", r.pid)
}

// Restart starts redis-server again, empty, on the same port after Kill.
func (r *Redis) Restart(ctx context.Context) error { return r.start(ctx) }

func (r *Redis) Stop() error {
	_ = syscall.Kill(r.pid, syscall.SIGCONT)
	err := killAndWait(r.pid)
	os.RemoveAll(r.dir)
	return err
}

// Postgres is a private PostgreSQL cluster (initdb in a temporary directory, run
// as the unprivileged postgres user when the harness runs as root).
type Postgres struct {
	addr   string
	dir    string
	bindir string
	asUser string
	pid    int
	paused []int
}

// StartPostgres initialises and starts a cluster on a free port with trust auth.
func StartPostgres(ctx context.Context) (*Postgres, error) {
	bindir, err := postgresBindir()
	if err != nil {
		return nil, err
	}
	port, dir, err := portAndDir("jfast-pg-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, bindir: bindir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		p.asUser = "postgres"
	}
	data := filepath.Join(dir, "data")
	if out, err := p.run(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off", port, dir)
	if out, err := p.run(ctx, "pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	pid, err := readPid(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		p.Stop()
		return nil, err
	}
	p.pid = pid
	return p, nil
}

func postgresBindir() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		if path, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(path), nil
		}
		return "", errors.New("PostgreSQL server binaries (pg_ctl, initdb) are not installed")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func (p *Postgres) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	bin := filepath.Join(p.bindir, tool)
	var cmd *exec.Cmd
	if p.asUser != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", p.asUser, "--", bin}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, bin, args...)
	}
	cmd.Dir = p.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

func (p *Postgres) Addr() string { return p.addr }

// URL is a DSN for database db as the postgres user.
func (p *Postgres) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", p.addr, db)
}

// Pause stops the postmaster first (so nothing new forks), then every backend it
// has: each backend calls setsid(), so stopping the postmaster alone would leave
// pooled connections answering.
func (p *Postgres) Pause() error {
	if err := stopAndWait(p.pid); err != nil {
		return err
	}
	p.paused = []int{p.pid}
	children, err := childPids(p.pid)
	if err != nil {
		return err
	}
	for _, c := range children {
		if stopAndWait(c) == nil {
			p.paused = append(p.paused, c)
		}
	}
	return nil
}

// Resume continues the processes Pause stopped, in reverse.
func (p *Postgres) Resume() error {
	for i := len(p.paused) - 1; i >= 0; i-- {
		_ = syscall.Kill(p.paused[i], syscall.SIGCONT)
	}
	p.paused = nil
	return nil
}

func (p *Postgres) Stop() error {
	p.Resume()
	var err error
	if p.pid != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if out, e := p.run(ctx, "pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "-w", "stop"); e != nil {
			err = fmt.Errorf("pg_ctl stop: %v: %s", e, out)
			_ = killAndWait(p.pid)
		}
	}
	os.RemoveAll(p.dir)
	return err
}

// stopAndWait sends SIGSTOP to pid and waits (up to 5 s) until every one of its
// threads is stopped: the signal is asynchronous, and a thread busy with a
// request would otherwise still answer it.
func stopAndWait(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %d: %w", pid, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !allStopped(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d did not stop within 5s of SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// allStopped reports whether every thread of pid is in state T (stopped) or
// the process is gone.
func allStopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return syscall.Kill(pid, 0) != nil
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false
		}
		if st := b[i+2]; st != 'T' && st != 't' && st != 'Z' && st != 'X' {
			return false
		}
	}
	return true
}

// childPids lists the direct children of pid from /proc.
func childPids(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may hold spaces.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 {
			if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

func readPid(path string) (int, error) {
	var last error
	for range 100 {
		b, err := os.ReadFile(path)
		if err == nil {
			line, _, _ := strings.Cut(string(b), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && pid > 0 {
				return pid, nil
			}
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("no pid in %s: %v", path, last)
}

// killAndWait sends SIGTERM, then SIGKILL after 5 s, and waits for pid to exit.
func killAndWait(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return nil
}
