package storage_test

import (
	"testing"
)

// An s3 disk refuses hedge_after and max_hedges whenever the file or the
// environment sets them, at their default value too: a disk call is never
// hedged, and a max_hedges = 1 that passed would read as if it did something.
func TestBootRefusesHedgingKeysSetToTheirDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		toml string
		env  map[string]string
	}{
		{"file", s3TOML("http://127.0.0.1:1", "b", `max_hedges = 1`, `hedge_after = ""`), nil},
		{"environment", s3TOML("http://127.0.0.1:1", "b"), map[string]string{
			"JFAST_STORAGE_DISKS__FILES__MAX_HEDGES":  "1",
			"JFAST_STORAGE_DISKS__FILES__HEDGE_AFTER": "",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := bootErrors(t, tc.toml, tc.env)
			for _, key := range []string{"plugin.storage.disks.files.max_hedges", "plugin.storage.disks.files.hedge_after"} {
				if _, ok := errorFor(errs, key); !ok {
					t.Errorf("%s set to its default was not refused: %v", key, errs)
				}
			}
			if len(errs) != 2 {
				t.Errorf("errors = %v, want hedge_after and max_hedges once each", errs)
			}
		})
	}
}
