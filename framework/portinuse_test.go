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
