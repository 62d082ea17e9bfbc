package mail

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A write the server takes no data for (it accepted DATA and reads none of
// the message) fails once it has waited command_timeout, and the connection
// says so; when the job's context ends first, it says the job ended while it
// waited for the server to take data. Over a real loopback connection to a
// server that never reads: writes block once the client's send buffer and
// the server's receive buffer are full (about 4 MB, measured, with Linux's
// default tcp_wmem), so the test writes raw bytes, not a message that
// go-mail would have to encode first. Before, the job's end named no wait.
func TestAWriteTheServerTakesNoDataForNamesItsWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		command time.Duration
		cancel  bool
		want    string
	}{
		{"command_timeout", 300 * time.Millisecond, false, "the server took no data within command_timeout"},
		{"the job's end", time.Minute, true, "the job's context ended (context canceled) while waiting for the server to take data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := l.Accept()
				if err == nil {
					accepted <- c // never read
				}
				close(accepted)
			}()
			raw, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			if srv := <-accepted; srv != nil {
				defer srv.Close()
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dc := newDeadlineConn(ctx, raw, time.Now().Add(time.Minute), tc.command)
			defer dc.Close()
			dc.setStep(stepCommands) // past the greeting: the body of DATA

			chunk := make([]byte, 64<<10)
			var written int
			for {
				// The first write that does not return at once waits on
				// full buffers: the job ends then, in the job's case.
				done := make(chan struct{})
				if tc.cancel {
					go func() {
						select {
						case <-done:
						case <-time.After(time.Second):
							cancel()
						}
					}()
				}
				n, err := dc.Write(chunk)
				close(done)
				written += n
				if err != nil {
					break
				}
				if written > 64<<20 {
					t.Fatalf("64 MiB written to a server that reads nothing")
				}
			}
			if got := dc.expired(); !strings.Contains(got, tc.want) {
				t.Fatalf("after %d bytes: %q, want %q", written, got, tc.want)
			}
			t.Logf("failed after %d bytes: %s", written, dc.expired())
		})
	}
}
