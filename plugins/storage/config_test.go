package storage_test

import (
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
)

// One test per boot rule (docs/storage.md lists them): each names the key and the fix.

func TestBootRefusesUnknownVisibility(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, localTOML(t.TempDir(), `visibility = "world"`), nil)
	e, ok := errorFor(errs, "plugin.storage.disks.files.visibility")
	if !ok || !strings.Contains(e.Problem, `"public" or "private"`) || e.Fix == "" {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootRefusesAccessKeyWithoutSecret(t *testing.T) {
	t.Parallel()
	toml := "[plugin.storage.disks.files]\ndriver = \"s3\"\nbucket = \"b\"\naccess_key = \"AKIA\"\n"
	errs := bootErrors(t, toml, nil)
	if _, ok := errorFor(errs, "plugin.storage.disks.files.secret_key"); !ok || len(errs) != 1 {
		t.Fatalf("errors = %v", errs)
	}
	// The secret from the environment (a deploy key) satisfies the rule.
	if errs := bootErrors(t, toml, map[string]string{"JFAST_STORAGE_DISKS__FILES__SECRET_KEY": "s3cr3t"}); errs != nil {
		t.Fatalf("with the secret in the environment: %v", errs)
	}
}

func TestBootRefusesSecretWithoutAccessKey(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage.disks.files]\ndriver = \"s3\"\nbucket = \"b\"\nsecret_key = \"s\"\n", nil)
	if _, ok := errorFor(errs, "plugin.storage.disks.files.access_key"); !ok {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootRefusesShortSigningKeyInProduction(t *testing.T) {
	t.Parallel()
	short := "short-signing-key-31-bytes-long!"[:31]
	toml := "[app]\nenv = \"production\"\n[plugin.storage.disks.files]\nroot = \"" + t.TempDir() + "\"\nsigning_key = \"" + short + "\"\n"
	errs := bootErrors(t, toml, nil)
	e, ok := errorFor(errs, "plugin.storage.disks.files.signing_key")
	if !ok || !strings.Contains(e.Problem, "at least 32 bytes") {
		t.Fatalf("errors = %v", errs)
	}
	if strings.Contains(errs.Error(), short) {
		t.Fatal("the signing key leaked into the error")
	}
	if !strings.Contains(e.Fix, "JFAST_STORAGE_DISKS__FILES__SIGNING_KEY") {
		t.Fatalf("fix %q, want it to name the disk's variable, JFAST_STORAGE_DISKS__FILES__SIGNING_KEY", e.Fix)
	}
	// 32 bytes pass; so does a short key in development.
	if errs := bootErrors(t, strings.Replace(toml, short, short+"x", 1), nil); errs != nil {
		t.Fatalf("32-byte key: %v", errs)
	}
	if errs := bootErrors(t, strings.Replace(toml, "production", "development", 1), nil); errs != nil {
		t.Fatalf("development: %v", errs)
	}
}

func TestBootRefusesMissingSigningKeyInProduction(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[app]\nenv = \"production\"\n[plugin.storage.disks.files]\nroot = \"/tmp/x\"\n", nil)
	if _, ok := errorFor(errs, "plugin.storage.disks.files.signing_key"); !ok {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootRefusesUnknownDriver(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage.disks.files]\ndriver = \"ftp\"\n", nil)
	if _, ok := errorFor(errs, "plugin.storage.disks.files.driver"); !ok {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootRefusesZeroDeadlines(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage.disks.files]\ndriver = \"s3\"\nbucket = \"b\"\nconnect_timeout = 0\nread_timeout = \"-1s\"\nbreaker_cool_down = \"0s\"\n", nil)
	for _, k := range []string{"connect_timeout", "read_timeout", "breaker_cool_down"} {
		if _, ok := errorFor(errs, "plugin.storage.disks.files."+k); !ok {
			t.Errorf("no error for %s in %v", k, errs)
		}
	}
}

func TestBootRefusesBadAttemptsAndBreaker(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage.disks.files]\ndriver = \"s3\"\nbucket = \"b\"\nattempts = 0\nbreaker_failures = 0\nbreaker_failure_rate = 1.5\nbreaker_minimum_calls = -1\nbreaker_window = 0\n", nil)
	for _, k := range []string{"attempts", "breaker_failures", "breaker_failure_rate", "breaker_minimum_calls", "breaker_window"} {
		if _, ok := errorFor(errs, "plugin.storage.disks.files."+k); !ok {
			t.Errorf("no error for %s in %v", k, errs)
		}
	}
}

// The policy keys are the shared ones (resilience.PolicyConfig): an s3 disk
// refuses their bad values in the shared words, a local disk (which has no
// policy) refuses them all, and hedging, which a disk does not do, is refused
// rather than ignored.
func TestBootPolicyKeys(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage.disks.files]\ndriver = \"s3\"\nbucket = \"b\"\ntimeout = \"0s\"\nretry_budget_ratio = 2\nmax_concurrent = 0\nhedge_after = \"20ms\"\n", nil)
	for _, k := range []string{"timeout", "retry_budget_ratio", "max_concurrent", "hedge_after"} {
		if _, ok := errorFor(errs, "plugin.storage.disks.files."+k); !ok {
			t.Errorf("s3: no error for %s in %v", k, errs)
		}
	}
	errs = bootErrors(t, "[plugin.storage.disks.files]\ndriver = \"local\"\nroot = \"/tmp/x\"\nattempts = 2\ntimeout = \"1s\"\nbreaker_failures = 3\n", nil)
	for _, k := range []string{"attempts", "timeout", "breaker_failures"} {
		if e, ok := errorFor(errs, "plugin.storage.disks.files."+k); !ok || !strings.Contains(e.Problem, "s3") {
			t.Errorf("local: no s3-only error for %s in %v", k, errs)
		}
	}
}

func TestBootRefusesLocalWithoutRoot(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage.disks.files]\ndriver = \"local\"\n", nil)
	if _, ok := errorFor(errs, "plugin.storage.disks.files.root"); !ok {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootRefusesS3WithoutBucket(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage.disks.files]\ndriver = \"s3\"\n", nil)
	if _, ok := errorFor(errs, "plugin.storage.disks.files.bucket"); !ok {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootRefusesOtherDriversKeys(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, localTOML(t.TempDir(), `bucket = "b"`, `read_timeout = "5s"`), nil)
	for _, k := range []string{"bucket", "read_timeout"} {
		if e, ok := errorFor(errs, "plugin.storage.disks.files."+k); !ok || !strings.Contains(e.Problem, `driver = "s3"`) {
			t.Errorf("no error for %s in %v", k, errs)
		}
	}
}

func TestBootRefusesPublicLocalWithoutBaseURL(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, localTOML(t.TempDir(), `visibility = "public"`), nil)
	if _, ok := errorFor(errs, "plugin.storage.disks.files.base_url"); !ok {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootRefusesBadURLs(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage]\npublic_url = \"api.example.com\"\n[plugin.storage.disks.files]\ndriver = \"s3\"\nbucket = \"b\"\nendpoint = \"127.0.0.1:7070\"\nbase_url = \"ftp://x\"\n", nil)
	for _, k := range []string{"plugin.storage.public_url", "plugin.storage.disks.files.endpoint", "plugin.storage.disks.files.base_url"} {
		if _, ok := errorFor(errs, k); !ok {
			t.Errorf("no error for %s in %v", k, errs)
		}
	}
}

func TestBootRefusesNoDisk(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "", nil)
	if _, ok := errorFor(errs, "plugin.storage.disks"); !ok {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootRefusesUnknownDefault(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage]\ndefault = \"uploads\"\n"+localTOML(t.TempDir()), nil)
	if _, ok := errorFor(errs, "plugin.storage.default"); !ok {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootRefusesSeveralDisksWithoutDefault(t *testing.T) {
	t.Parallel()
	toml := localTOML(t.TempDir()) + "[plugin.storage.disks.other]\nroot = \"" + t.TempDir() + "\"\n"
	errs := bootErrors(t, toml, nil)
	if _, ok := errorFor(errs, "plugin.storage.default"); !ok {
		t.Fatalf("errors = %v", errs)
	}
	if errs := bootErrors(t, "[plugin.storage]\ndefault = \"other\"\n"+toml, nil); errs != nil {
		t.Fatalf("with default: %v", errs)
	}
}

func TestBootRefusesBadDiskName(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage.disks.Files]\nroot = \"/tmp/x\"\n", nil)
	if _, ok := errorFor(errs, "plugin.storage.disks.Files"); !ok {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootRefusesUnknownKeyWithSuggestion(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, localTOML(t.TempDir(), `visibilty = "public"`), nil)
	e, ok := errorFor(errs, "plugin.storage.disks.files.visibilty")
	if !ok || !strings.Contains(e.Fix, `"visibility"`) {
		t.Fatalf("errors = %v", errs)
	}
}

func TestBootReportsEveryErrorTogether(t *testing.T) {
	t.Parallel()
	errs := bootErrors(t, "[plugin.storage.disks.a]\ndriver = \"s3\"\nvisibility = \"x\"\naccess_key = \"k\"\n", nil)
	if len(errs) < 3 { // visibility, bucket, secret_key
		t.Fatalf("want every error at once, got %v", errs)
	}
}

func TestS3DefaultsNeedOnlyABucket(t *testing.T) {
	t.Parallel()
	if errs := bootErrors(t, "[plugin.storage.disks.files]\ndriver = \"s3\"\nbucket = \"b\"\n", nil); errs != nil {
		t.Fatalf("errors = %v", errs)
	}
}

// An old key renamed to one a local disk does not have is refused with a
// fix that holds: remove it, not write the new key the disk refuses too.
func TestBootRefusesRenamedKeyALocalDiskDoesNotHave(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, tc := range []struct {
		name, toml, key string
		env             map[string]string
	}{
		{"file", localTOML(root, "retries = 2"), "plugin.storage.disks.files.retries", nil},
		{"file, upper case", localTOML(root, "MAX_ATTEMPTS = 2"), "plugin.storage.disks.files.MAX_ATTEMPTS", nil},
		{"environment", localTOML(root, ""), "JFAST_STORAGE_DISKS__FILES__RETRIES", map[string]string{"JFAST_STORAGE_DISKS__FILES__RETRIES": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := bootErrors(t, tc.toml, tc.env).Only(t, tc.key)
			if e.Problem != `was renamed to "attempts", which does not apply here either` ||
				!strings.HasPrefix(e.Fix, "remove ") || !strings.HasSuffix(e.Fix, `: a local disk does not retry (attempts applies only to driver = "s3")`) {
				t.Errorf("%q", e.Error())
			}
		})
	}
	// On an S3 disk the new key applies: the fix is to write it.
	e := bootErrors(t, "[plugin.storage.disks.files]\ndriver = \"s3\"\nbucket = \"b\"\nretries = 2\n", nil).Only(t, "plugin.storage.disks.files.retries")
	if e.Problem != `was renamed to "attempts"` || !strings.HasPrefix(e.Fix, "write attempts instead") {
		t.Errorf("s3: %q", e.Error())
	}
}

// A disk's bad name is refused in the words every named table shares, with
// a name offered only when it is one the rule accepts.
func TestBootRefusesBadDiskNameInTheSharedWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, like string }{
		{"Files", `("files" would do; `},
		{"-files", `("files" would do; `},
		{"ünï", "(it names"},
		{strings.Repeat("f", 101), `("` + strings.Repeat("f", 100) + `" would do; `},
	} {
		e := bootErrors(t, "[plugin.storage.disks.\""+tc.name+"\"]\nroot = \"/tmp/x\"\n", nil).Only(t, "plugin.storage.disks."+tc.name)
		want := "rename it: a name is " + framework.NameRule + " " + tc.like
		if e.Problem != "is not a valid disk name" || !strings.HasPrefix(e.Fix, want) || !strings.HasSuffix(e.Fix, "JFAST_STORAGE_DISKS__<NAME>__*)") {
			t.Errorf("%s: %q, want the fix to start %q", tc.name, e.Error(), want)
		}
	}
}
