package queue

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/jfastframework/jfast/framework"
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

// TestRiverQueueRuleIsRiversRule: on the postgres backend a queue name is
// refused by jfast (riverQueueName) exactly when River's client refuses it
// (no database is reached), for names the framework's name rule accepts.
func TestRiverQueueRuleIsRiversRule(t *testing.T) {
	t.Parallel()
	names := []string{"a", "default", "orders_high", "orders-high", "a1", "1a", "a_", "a-", "a__b", "a-_b", "a_-b", "a--b",
		"a_b-c", strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("ab_", 21) + "a", strings.Repeat("a", 100)}
	// A pool River can hold; it never connects (nothing is run).
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, name := range names {
		if !framework.ValidName(name) {
			t.Fatalf("%q: not a name the framework's rule accepts; the table is wrong", name)
		}
		_, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
			Queues:  map[string]river.QueueConfig{name: {MaxWorkers: 1}},
			Workers: river.NewWorkers(),
		})
		if ours := riverQueueName(name); ours != (err == nil) {
			t.Errorf("queue %q: riverQueueName %v, River's error %v; want the same verdict", name, ours, err)
		}
	}
}
