package storage_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/jfasttest"
)

// An s3 disk whose server accepts the connection and never answers is named in
// /ready with the cause, before readiness_timeout, and the disks that answered
// are reported beside it: the check gives each probe two thirds of its time,
// so it answers before the readiness deadline ends the whole check as a
// timeout naming nothing.
func TestReadinessNamesTheSilentDisk(t *testing.T) {
	t.Parallel()
	silent := jfasttest.SilentServer(t)
	toml := fmt.Sprintf(`[plugin.storage]
default = "loc"
[plugin.storage.disks.loc]
driver = "local"
root = %q
signing_key = %q
[plugin.storage.disks.pub]
driver = "local"
root = %q
signing_key = %q
visibility = "public"
base_url = "https://cdn.example.com/pub"
[plugin.storage.disks.s3d]
driver = "s3"
bucket = "silent"
endpoint = %q
path_style = true
access_key = %q
secret_key = %q
`, t.TempDir(), testSigningKey, t.TempDir(), testSigningKey, "http://"+silent, testAccessKey, testSecretKey)
	s := start(t, toml, "loc", nil)

	r := s.svc.Get(t, "/ready")
	var got struct {
		Checks map[string]struct {
			Status string
			Detail string
			Meta   struct {
				Disks map[string]struct {
					Healthy bool
				}
			}
		}
	}
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatalf("/ready = %d %s: %v", r.Status, r.Body, err)
	}
	c := got.Checks["storage"]
	if c.Status != "fail" || !strings.Contains(c.Detail, `disk "s3d": no answer to the HEAD of bucket "silent" within `) {
		t.Fatalf("storage check = %+v, want a failure naming the disk and the HEAD (%s)", c, r.Body)
	}
	if d := c.Meta.Disks; len(d) != 3 || !d["loc"].Healthy || !d["pub"].Healthy || d["s3d"].Healthy {
		t.Fatalf("meta.disks = %+v, want loc and pub healthy, s3d not", d)
	}
	if strings.Contains(r.String(), testSecretKey) {
		t.Fatalf("/ready shows the secret key: %s", r.Body)
	}
}
