package resilience

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogStateChangesHangReason: a hang that opens the breaker is logged with
// the reason of the state it left. Only one from half-open involves a probe;
// one from closed (TripOnSilence, Trip) is a call or a check met by silence.
func TestLogStateChangesHangReason(t *testing.T) {
	cases := []struct {
		from       State
		want, dont string
	}{
		{StateHalfOpen, "a probe got no answer", "answered nothing"},
		{StateClosed, "answered nothing since the call that hung was sent", "probe"},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		log := LogStateChanges(slog.New(slog.NewTextHandler(&buf, nil)), "db", 15*time.Second, nil)
		log(StateChange{Name: "db", From: c.from, To: StateOpen, Hang: true})
		line := buf.String()
		if !strings.Contains(line, c.want) || strings.Contains(line, c.dont) {
			t.Errorf("opened from %s by a hang: logged %q, want %q and not %q", c.from, line, c.want, c.dont)
		}
	}
}
