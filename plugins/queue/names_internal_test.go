package queue

import (
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// riverAccepts reports whether River would start workers for kind: its
// client's configuration check, the one that refused a one-character kind
// when the worker client was made (no database is reached).
func riverAccepts(kind string) error {
	workers := river.NewWorkers()
	if err := safeAddWorker(workers, kind, &riverWorker{}); err != nil {
		return err
	}
	_, err := river.NewClient(riverpgxv5.New(nil), &river.Config{Workers: workers})
	return err
}

// TestKindRuleIsRiversRule: every kind KindRule accepts River accepts, so the
// postgres workers never fail to start over a kind Handle let through; and
// the kinds River refuses that the rule refused too (one character, a
// word character then something else) stay refused.
func TestKindRuleIsRiversRule(t *testing.T) {
	t.Parallel()
	kinds := []string{"ab", "a1", "0a", "Ab", "a_", "a-", "a.", "a:", "send_receipt", "mail.send",
		"mail:welcome-v2", strings.Repeat("a", 100)}
	for c := range 256 {
		kinds = append(kinds, string([]byte{byte(c)}), string([]byte{'a', byte(c)}), string([]byte{byte(c), 'a'}))
	}
	for _, k := range kinds {
		err := riverAccepts(k)
		if validKind(k) && err != nil {
			t.Errorf("kind %q: KindRule accepts it, River refuses it: %v", k, err)
		}
		if len(k) == 1 && (validKind(k) || err == nil) {
			t.Errorf("kind %q: validKind %v, River's error %v; want both to refuse it", k, validKind(k), err)
		}
	}
}
