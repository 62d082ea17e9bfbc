package framework_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jfastframework/jfast/framework"
)

// holdPortEnv makes the test binary a process that listens on a loopback
// port, prints it and waits for its stdin to close (TestMain runs holdPort
// instead of the tests; see startPortHolder).
const holdPortEnv = "JFAST_TEST_HOLD_PORT"

func holdPort() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	ln.Close()
}

// startPortHolder starts another process (this test binary again) listening
// on a loopback port, and returns the address and the process's pid.
func startPortHolder(t *testing.T) (string, int) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holdPortEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the port holder: %v", err)
	}
	return strings.TrimSpace(addr), cmd.Process.Pid
}

// TestPortInUseSaysWhoAndTheFix: app.listen and app.admin_listen on a port
// another process holds refuse the start naming the key, the process (found
// through /proc) and a free port to give through the environment.
func TestPortInUseSaysWhoAndTheFix(t *testing.T) {
	t.Parallel()
	held, pid := startPortHolder(t)
	_, port, _ := net.SplitHostPort(held)
	for _, tc := range []struct{ key, env, toml string }{
		{"app.listen", "JFAST_APP_LISTEN", fmt.Sprintf("[app]\nlisten = %q\n", held)},
		{"app.admin_listen", "JFAST_APP_ADMIN_LISTEN", fmt.Sprintf("[app]\nlisten = \"127.0.0.1:0\"\nadmin_listen = %q\n", held)},
	} {
		t.Run(tc.key, func(t *testing.T) {
			app, err := framework.New(framework.Options{ConfigText: tc.toml, Environ: []string{}, LogOutput: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			err = app.Start(context.Background())
			if err == nil {
				_ = app.Stop(context.Background())
				t.Fatalf("started on %s, which another process holds", held)
			}
			msg := err.Error()
			for _, want := range []string{
				"listen on " + held + " (" + tc.key + ")",
				"address already in use",
				fmt.Sprintf("(by pid %d: %s)", pid, os.Args[0]),
				"fix: stop what holds port " + port + ", or listen on another port: " + tc.env + "=127.0.0.1:",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("errors.Is(err, EADDRINUSE) = false: %v", err)
			}
			// The suggested port is one this process could listen on.
			_, suggested, _ := strings.Cut(msg, tc.env+"=")
			suggested, _, _ = strings.Cut(suggested, " ")
			if p, _ := strconv.Atoi(strings.TrimPrefix(suggested, "127.0.0.1:")); p <= 0 || suggested == held {
				t.Errorf("suggested %q, want another port of 127.0.0.1", suggested)
			}
		})
	}
}

// heldListener is a plugin that serves a protocol of its own on a listener
// it is given (as the grpc plugin's server does on its listen key), without
// reporting its address to the validation.
type heldListener struct{ ln net.Listener }

func (p *heldListener) Name() string                       { return "held" }
func (p *heldListener) Serve(*framework.App) error         { return nil }
func (p *heldListener) Shutdown(ctx context.Context) error { return p.ln.Close() }

// TestPortHeldByTheServiceItself: app.listen on the port another listener of
// the same service holds says so, though that listener is shut down before
// the start returns.
func TestPortHeldByTheServiceItself(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	app, err := framework.New(framework.Options{
		ConfigText: fmt.Sprintf("[app]\nlisten = %q\n[plugins]\nenabled = [\"held\"]\n", ln.Addr()),
		Environ:    []string{}, LogOutput: io.Discard,
		Plugins: []framework.Plugin{&heldListener{ln: ln}},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Start(context.Background())
	if err == nil {
		_ = app.Stop(context.Background())
		t.Fatal("started on a port the service holds")
	}
	if want := "(by this process: another of its listeners has port " + port + ")"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
}

// listensOn is a plugin whose validation reports a listener of its own on
// [plugin.listens] listen.
type listensOn struct{ cfg struct{ Listen string } }

func (p *listensOn) Name() string                     { return "listens" }
func (p *listensOn) Config() any                      { return &p.cfg }
func (p *listensOn) Validate(v *framework.Validation) { v.Listens("listen", p.cfg.Listen) }

// TestListenersThatShareAPortAreRefused: two listeners of one configuration
// that cannot both listen are refused before anything listens, naming both
// keys; different ports, port 0 and hosts of another family pass.
func TestListenersThatShareAPortAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, app, plugin, key, want string }{
		{"plugin on app.listen", `listen = "127.0.0.1:27200"`, "127.0.0.1:27200", "plugin.listens.listen",
			"plugin.listens.listen: is 127.0.0.1:27200, and app.listen is 127.0.0.1:27200: two listeners of this service cannot share a port (the second would fail the start with address already in use); fix: give one of them a port of its own: plugin.listens.listen (JFAST_LISTENS_LISTEN) or app.listen (JFAST_APP_LISTEN)"},
		{"plugin on the admin port", "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:27201\"", "127.0.0.1:27201", "plugin.listens.listen", "and app.admin_listen is 127.0.0.1:27201"},
		{"app on every address", `listen = ":27202"`, "127.0.0.1:27202", "plugin.listens.listen", "and app.listen is :27202"},
		{"plugin on every IPv4 address", `listen = "127.0.0.1:27203"`, "0.0.0.0:27203", "plugin.listens.listen", "is 0.0.0.0:27203, and app.listen"},
		{"admin on every address", "listen = \"127.0.0.1:27204\"\nadmin_listen = \"[::]:27204\"", "", "app.admin_listen", "is [::]:27204, and app.listen is 127.0.0.1:27204"},
		{"another port", `listen = "127.0.0.1:27205"`, "127.0.0.1:27206", "", ""},
		{"port 0 twice", `listen = "127.0.0.1:0"`, "127.0.0.1:0", "", ""},
		{"IPv4 wildcard and IPv6 loopback", `listen = "0.0.0.0:27207"`, "[::1]:27207", "plugin.listens.listen", "is [::1]:27207, and app.listen is 0.0.0.0:27207"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			text := "[app]\n" + tc.app + "\n[plugins]\nenabled = [\"listens\"]\n"
			if tc.plugin != "" {
				text += fmt.Sprintf("[plugin.listens]\nlisten = %q\n", tc.plugin)
			}
			_, err := framework.New(framework.Options{ConfigText: text, Environ: []string{}, LogOutput: io.Discard,
				Plugins: []framework.Plugin{&listensOn{}}})
			var errs framework.ConfigErrors
			if tc.key == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Key != tc.key || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("error %v, want one on %s saying %q", err, tc.key, tc.want)
			}
		})
	}
}

// TestListenersOnOverlappingHosts classifies pairs of listen addresses: they
// conflict when their port is one (not 0) and their hosts overlap. A
// wildcard overlaps everything (Go listens on [::] for 0.0.0.0, and [::]
// takes IPv4 too); IP addresses are compared parsed; localhost and the names
// under it are the loopback addresses; other names are compared as written,
// never looked up. Each pair is tried in both orders, as app.listen and a
// plugin's key, and as app.listen and app.admin_listen; only the validation
// runs, nothing listens or dials.
func TestListenersOnOverlappingHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b     string
		conflict bool
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"localhost:8080", "127.0.0.1:8080", true},
		{"localhost:8080", "[::1]:8080", true},
		{"LocalHost:8080", "127.0.0.1:8080", true},
		{"localhost.:8080", "[::1]:8080", true},
		{"api.localhost:8080", "127.0.0.1:8080", true},
		{"api.localhost:8080", "localhost:8080", true},
		{"0.0.0.0:8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "[::1]:8080", true},
		{"0.0.0.0:8080", "[::]:8080", true},
		{"[::]:8080", "127.0.0.1:8080", true},
		{"[::]:8080", "localhost:8080", true},
		{"[::ffff:0.0.0.0]:8080", "[::1]:8080", true},
		{":8080", "10.0.0.7:8080", true},
		{":8080", "orders.internal:8080", true},
		{":8080", "[::1]:8080", true},
		{"[::1]:8080", "[0:0:0:0:0:0:0:1]:8080", true},
		{"[::ffff:127.0.0.1]:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:08080", "127.0.0.1:8080", true},
		{"Orders.Internal:8080", "orders.internal:8080", true},

		{"localhost:8080", "127.0.0.1:8081", false},
		{"localhost:8080", "127.0.0.2:8080", false},
		{"localhost:8080", "10.0.0.7:8080", false},
		{"127.0.0.1:8080", "[::1]:8080", false},
		{"10.0.0.7:8080", "10.0.0.8:8080", false},
		{"0.0.0.0:8080", "0.0.0.0:8081", false},
		{"0.0.0.0:0", "127.0.0.1:0", false},
		{":0", "[::]:0", false},
		{"localhost:0", "127.0.0.1:0", false},
		{"orders.internal:8080", "10.0.0.7:8080", false},
		{"orders.internal:8080", "localhost:8080", false},
		{"orders.internal:8080", "billing.internal:8080", false},
	} {
		for _, shape := range []struct{ name, first, second, key string }{
			{"plugin after app.listen", tc.a, tc.b, "plugin.listens.listen"},
			{"app.listen after plugin", tc.b, tc.a, "plugin.listens.listen"},
			{"admin after app.listen", tc.a, tc.b, "app.admin_listen"},
		} {
			t.Run(tc.a+" "+tc.b+" "+shape.name, func(t *testing.T) {
				t.Parallel()
				text := fmt.Sprintf("[app]\nlisten = %q\n", shape.first)
				if shape.key == "app.admin_listen" {
					text += fmt.Sprintf("admin_listen = %q\n", shape.second)
				}
				text += "[plugins]\nenabled = [\"listens\"]\n"
				if shape.key == "plugin.listens.listen" {
					text += fmt.Sprintf("[plugin.listens]\nlisten = %q\n", shape.second)
				}
				_, err := framework.New(framework.Options{ConfigText: text, Environ: []string{}, LogOutput: io.Discard,
					Plugins: []framework.Plugin{&listensOn{}}})
				if !tc.conflict {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				var errs framework.ConfigErrors
				if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Key != shape.key {
					t.Fatalf("error %v, want one on %s", err, shape.key)
				}
				// The same text on both app keys is validateAdminListen's
				// ("must differ from app.listen").
				want := fmt.Sprintf("is %s, and app.listen is %s: two listeners of this service cannot share a port", shape.second, shape.first)
				if shape.first != shape.second && !strings.Contains(errs[0].Error(), want) {
					t.Fatalf("error %q lacks %q", errs[0].Error(), want)
				}
			})
		}
	}
}
