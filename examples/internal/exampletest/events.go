package exampletest

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// Events opens the event stream at url with the header pairs given and
// returns its lines once the stream is open (its first line, the retry
// delay, arrived). The stream is closed when the test ends.
func Events(t testing.TB, url string, headers ...string) <-chan string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	if l := <-lines; !strings.HasPrefix(l, "retry: ") {
		t.Fatalf("the stream's first line is %q", l)
	}
	return lines
}
