package channels

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/jfasttest"
)

// childEnv names the variables of the replica TestDurableReplicaKilled starts
// as a process of its own.
const (
	childEnv       = "JFAST_CHANNELS_CHILD"
	childPrefixEnv = "JFAST_CHANNELS_CHILD_PREFIX"
	childTOMLEnv   = "JFAST_CHANNELS_CHILD_TOML"
)

const killTOML = "durable = [\"order.paid\"]\nhandler_timeout = \"1s\"\nvisibility_timeout = \"1500ms\"\nhealth_check_interval = \"200ms\""

// A replica is killed (SIGKILL, a process of its own) while its handler runs:
// the message it held is claimed by another replica after visibility_timeout
// and handled there, once, as its second delivery, then acknowledged.
func TestDurableReplicaKilled(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", killTOML)
	child := exec.Command(os.Args[0], "-test.run=^TestChildReplica$", "-test.v")
	child.Env = append(os.Environ(), childEnv+"=1", childPrefixEnv+"="+cl.prefix, childTOMLEnv+"="+killTOML)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(prefix string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the child replica exited before saying %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return
				}
			case <-timeout:
				t.Fatalf("the child replica did not say %q within 30s", prefix)
			}
		}
	}
	expect("SUBSCRIBED")
	pub := cl.start(nil)
	published := time.Now()
	if err := pub.ch.Publish(context.Background(), "order.paid", []byte("order-42")); err != nil {
		t.Fatal(err)
	}
	expect("HANDLING order-42")
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	killed := time.Now()

	in := newInbox()
	cl.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("order.paid", in.handler) })
	in.wait(t, 1, 15*time.Second)
	took, sincePublish := time.Since(killed), time.Since(published)
	msgs, _ := in.all()
	if m := msgs[0]; string(m.Payload) != "order-42" || m.Delivery != 2 {
		t.Fatalf("the other replica got %+v, want order-42 as its second delivery", m)
	}
	if sincePublish < 1500*time.Millisecond {
		t.Errorf("claimed %s after the publish, before visibility_timeout (1.5s)", sincePublish)
	}
	t.Logf("handled by the other replica %s after the kill", took.Round(time.Millisecond))
	waitFor(t, 5*time.Second, "nothing pending", func() bool {
		p, err := pub.ch.client.XPending(context.Background(), cl.prefix+"order.paid", "chantest").Result()
		return err == nil && p.Count == 0
	})
	time.Sleep(2 * time.Second) // a second claim would show now
	if n := in.len(); n != 1 {
		t.Fatalf("handled %d times after the kill, want once", n)
	}
}

// TestChildReplica is the replica TestDurableReplicaKilled kills: it runs
// only as that test's child process. Its handler announces the message and
// never returns.
func TestChildReplica(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs only as TestDurableReplicaKilled's child process")
	}
	cl := &cluster{t: t, url: sharedURL, prefix: os.Getenv(childPrefixEnv), toml: os.Getenv(childTOMLEnv), clock: jfasttest.NewClock()}
	rep := cl.start(func(ch *Plugin, r chi.Router) error {
		return ch.Subscribe("order.paid", func(ctx context.Context, m Message) error {
			fmt.Printf("HANDLING %s\n", m.Payload)
			select {} // until SIGKILL
		})
	})
	subscribed(t, rep.ch)
	fmt.Println("SUBSCRIBED")
	select {}
}
