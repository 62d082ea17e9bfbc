package db

import (
	"context"
	"testing"
	"time"
)

// config shows the application_name the sessions really get: app.name when
// nothing else names them, the key when it is set, and where it comes from
// when the connection string names them.
func TestConfigShowsTheApplicationNameInForce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, table   string
		env           map[string]string
		value, source string
		session       string
	}{
		{"app.name", "", map[string]string{"JFAST_DB_URL": testURL()}, `"dbtest"`, "default: app.name", "dbtest"},
		{"the key", "application_name = \"orders\"\n", map[string]string{"JFAST_DB_URL": testURL()}, `"orders"`, "file", "orders"},
		{"the url", "", map[string]string{"JFAST_DB_URL": testURL() + "&application_name=fromurl"},
			`""`, "default: the connection string's application_name, else app.name", "fromurl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, d := startWithDB(t, tc.table, tc.env)
			if out := effectiveConfig(t, svc.App); !configLine("application_name", tc.value, tc.source).MatchString(out) {
				t.Errorf("config does not show application_name = %s  # %s:\n%s", tc.value, tc.source, out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got string
			if err := d.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&got); err != nil || got != tc.session {
				t.Fatalf("session application_name = %q, %v; want %q", got, err, tc.session)
			}
		})
	}
}
