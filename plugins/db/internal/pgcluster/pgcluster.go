// Package pgcluster starts a private PostgreSQL cluster for tests that must
// pause a real server (SIGSTOP on the postmaster and every backend), which
// would break every other suite if done to the machine's shared server.
package pgcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cluster is a running private cluster.
type Cluster struct {
	Port int
	dir  string
	bin  string
	pid  int
}

// URL is a connection string to the cluster's postgres database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
}

// Start initialises a cluster in a new directory and starts it on a free
// loopback port. It runs the server as the postgres user when run as root.
func Start(ctx context.Context) (*Cluster, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "jfast-pgcluster-")
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if err := exec.CommandContext(ctx, "chown", "postgres:postgres", dir).Run(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgcluster: chown: %w", err)
		}
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Cluster{Port: port, dir: dir, bin: bin}
	data := filepath.Join(dir, "data")
	if out, err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgcluster: initdb: %w: %s", err, out)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", port, dir)
	if out, err := c.run(ctx, "pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgcluster: start: %w: %s", err, out)
	}
	pidText, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err == nil {
		c.pid, _ = strconv.Atoi(strings.SplitN(string(pidText), "\n", 2)[0])
	}
	if c.pid == 0 {
		c.Stop()
		return nil, fmt.Errorf("pgcluster: no postmaster pid")
	}
	return c, nil
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	return cmd.CombinedOutput()
}

// children returns the pids of the postmaster's children (its backends and
// auxiliary processes).
func (c *Cluster) children() []int {
	out, _ := exec.Command("ps", "-o", "pid=", "--ppid", strconv.Itoa(c.pid)).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Pause stops the postmaster (nothing new forks) and then every child:
// sockets stay open and nothing answers. Backends call setsid, so
// stopping the process group is not enough.
func (c *Cluster) Pause() {
	_ = syscall.Kill(c.pid, syscall.SIGSTOP)
	for _, pid := range c.children() {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
}

// Resume continues every child, then the postmaster.
func (c *Cluster) Resume() {
	for _, pid := range c.children() {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	_ = syscall.Kill(c.pid, syscall.SIGCONT)
}

// Stop resumes the cluster, stops it (immediate mode) and removes its
// directory.
func (c *Cluster) Stop() {
	if c.pid != 0 {
		c.Resume()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, _ = c.run(ctx, "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop")
		cancel()
	}
	os.RemoveAll(c.dir)
}

func findBin() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", fmt.Errorf("pgcluster: initdb not found (install postgresql)")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
