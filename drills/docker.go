package drills

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// DockerClient is the Debian client; /usr/local/bin/docker and the like may be
// something else on a given machine.
const DockerClient = "/usr/bin/docker"

// dockerd is Debian's engine binary (package docker.io).
const dockerd = "/usr/sbin/dockerd"

// ErrNoEngine is wrapped by StartEngine's error when no Docker engine can run
// here; the error says why (not installed, not root, the daemon would not start).
var ErrNoEngine = errors.New("no docker engine")

// installDocker is the install script, relative to the repository's root.
const installDocker = "scripts/install-docker.sh"

// repoRoot returns the first directory from dir upwards that holds go.mod and
// scripts/install-docker.sh.
func repoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		_, errMod := os.Stat(filepath.Join(d, "go.mod"))
		_, errScript := os.Stat(filepath.Join(d, installDocker))
		if errMod == nil && errScript == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no directory from %s upwards holds go.mod and %s", dir, installDocker)
		}
		d = parent
	}
}

// Engine is a private dockerd: its own data root, exec root, socket and
// pidfile, with --iptables=false --ip6tables=false --bridge=none, so it
// changes nothing on the machine and containers run with --network host.
type Engine struct {
	dir, sock string
	cmd       *exec.Cmd
}

// StartEngine starts a private dockerd. When dockerd is not installed it runs
// scripts/install-docker.sh of the jfast repository found from dir upwards
// (the first directory holding both go.mod and that script: a test's working
// directory is its package's, at any depth) if JFAST_DRILL_DOCKER=1 or CI is
// set; otherwise, or when the daemon does not answer within 60 s, the error
// wraps ErrNoEngine and names the reason.
func StartEngine(ctx context.Context, dir string) (*Engine, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: dockerd needs root", ErrNoEngine)
	}
	if _, err := os.Stat(dockerd); err != nil {
		if os.Getenv("JFAST_DRILL_DOCKER") != "1" && os.Getenv("CI") == "" {
			return nil, fmt.Errorf("%w: %s is not installed (JFAST_DRILL_DOCKER=1 installs it with scripts/install-docker.sh)", ErrNoEngine, dockerd)
		}
		root, err := repoRoot(dir)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoEngine, err)
		}
		script := filepath.Join(root, installDocker)
		cmd := exec.CommandContext(ctx, "sh", script)
		cmd.Env = append(os.Environ(), "JFAST_DRILL_DOCKER=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%w: %s failed: %v: %s", ErrNoEngine, script, err, out)
		}
	}
	dir, err := os.MkdirTemp("", "jfast-docker-")
	if err != nil {
		return nil, err
	}
	e := &Engine{dir: dir, sock: filepath.Join(dir, "docker.sock")}
	log, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer log.Close()
	e.cmd = exec.Command(dockerd,
		"--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"-H", "unix://"+e.sock, "--pidfile", filepath.Join(dir, "dockerd.pid"),
		"--iptables=false", "--ip6tables=false", "--bridge=none")
	e.cmd.Stdout, e.cmd.Stderr = log, log
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: start dockerd: %v", ErrNoEngine, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := e.Docker(ctx, "version"); err == nil {
			return e, nil
		}
		if time.Now().After(deadline) || !processAlive(e.cmd.Process.Pid) || ctx.Err() != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
			e.Stop()
			return nil, fmt.Errorf("%w: dockerd did not answer: %s", ErrNoEngine, lastLines(b, 5))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Host is the DOCKER_HOST of the engine ("unix:///.../docker.sock").
func (e *Engine) Host() string { return "unix://" + e.sock }

// Docker runs the Debian docker client against the engine.
func (e *Engine) Docker(ctx context.Context, args ...string) ([]byte, error) {
	return runDocker(ctx, e.Host(), nil, args...)
}

func runDocker(ctx context.Context, host string, stdin io.Reader, args ...string) ([]byte, error) {
	client := DockerClient
	if _, err := os.Stat(client); err != nil {
		client = "docker"
	}
	if host != "" {
		args = append([]string{"-H", host}, args...)
	}
	cmd := exec.CommandContext(ctx, client, args...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Stop removes every container, stops dockerd by its pid (and the containerd
// it started), unmounts what it left mounted and removes its directory.
func (e *Engine) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ids, err := e.Docker(ctx, "ps", "-aq"); err == nil && len(bytes.TrimSpace(ids)) > 0 {
		_, _ = e.Docker(ctx, append([]string{"rm", "-f"}, strings.Fields(string(ids))...)...)
	}
	if e.cmd != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = e.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = e.cmd.Process.Kill()
			<-done
		}
	}
	// dockerd leaves its network namespace and overlay mounts under its roots.
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		var mounts []string
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], e.dir+"/") {
				mounts = append(mounts, f[1])
			}
		}
		for i := len(mounts) - 1; i >= 0; i-- {
			_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
		}
	}
	return os.RemoveAll(e.dir)
}

// RedisImage is the tag BuildRedisImage gives the image.
const RedisImage = "jfast-drill-redis:local"

// BuildRedisImage imports an image holding the machine's redis-server and the
// libraries it links (from ldd): no registry is needed.
func (e *Engine) BuildRedisImage(ctx context.Context) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not installed: %w", err)
	}
	bin, err = filepath.EvalSymlinks(bin)
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		return fmt.Errorf("ldd %s: %w", bin, err)
	}
	files := map[string]string{"/usr/bin/redis-server": bin}
	for _, p := range regexp.MustCompile(`(/[^ \t\n]+)`).FindAllString(string(out), -1) {
		files[p] = p
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	addDir := func(d string) error {
		var chain []string
		for ; d != "/" && d != "." && !dirs[d]; d = filepath.Dir(d) {
			chain = append(chain, d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			dirs[chain[i]] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(chain[i], "/") + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := addDir("/tmp"); err != nil {
		return err
	}
	for dst, src := range files {
		b, err := os.ReadFile(src) // follows symlinks: the image holds real files
		if err != nil {
			return err
		}
		if err := addDir(filepath.Dir(dst)); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(dst, "/"), Mode: 0o755, Size: int64(len(b))}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err = runDocker(ctx, e.Host(), &buf, "import", "-", RedisImage)
	return err
}

// RunRedis runs a container of RedisImage named name with --network host,
// redis-server listening on a free loopback port, and waits until it answers.
func (e *Engine) RunRedis(ctx context.Context, name string) (*Container, string, error) {
	port, err := FreePort()
	if err != nil {
		return nil, "", err
	}
	if _, err := e.Docker(ctx, "run", "-d", "--name", name, "--network", "host", RedisImage,
		"/usr/bin/redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"); err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := waitPort(wctx, addr); err != nil {
		return nil, "", err
	}
	return &Container{Name: name, Host: e.Host()}, addr, nil
}

// Container is a container the drill may pause: one it started on its own
// Engine, or one the user named (JFAST_DRILL_<DEP>_CONTAINER).
type Container struct {
	// Name is the container's name or id.
	Name string
	// Host is the DOCKER_HOST to reach its engine; empty uses the client's
	// default (DOCKER_HOST from the environment, or the standard socket).
	Host string
}

// Pause runs docker pause: the container's processes are frozen (cgroup
// freezer), its sockets stay open and nothing answers.
func (c *Container) Pause() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := runDocker(ctx, c.Host, nil, "pause", c.Name)
	return err
}

// Resume runs docker unpause.
func (c *Container) Resume() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := runDocker(ctx, c.Host, nil, "unpause", c.Name)
	return err
}

// ContainerVar is the variable that names the user's container for dep
// ("PG", "REDIS", ...): JFAST_DRILL_<DEP>_CONTAINER.
func ContainerVar(dep string) string { return "JFAST_DRILL_" + strings.ToUpper(dep) + "_CONTAINER" }

// URLVar is the variable holding the address of the user's container for dep:
// JFAST_DRILL_<DEP>_URL.
func URLVar(dep string) string { return "JFAST_DRILL_" + strings.ToUpper(dep) + "_URL" }

// UserContainer returns the container and URL the user named for dep, or the
// reason there is none (naming the variables), for a visible SKIP line.
func UserContainer(dep string) (*Container, string, string) {
	name, url := os.Getenv(ContainerVar(dep)), os.Getenv(URLVar(dep))
	if name == "" {
		return nil, "", ContainerVar(dep) + " is not set"
	}
	if url == "" {
		return nil, "", URLVar(dep) + " is not set (the address of " + name + ")"
	}
	return &Container{Name: name}, url, ""
}
