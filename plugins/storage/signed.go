package storage

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// signer makes and checks the temporary URLs of one local disk. The signature is
// HMAC-SHA256(signing_key, "GET\n" + disk + "\n" + key + "\n" + expires), in
// unpadded base64url; expires is Unix seconds.
type signer struct {
	disk   string
	key    []byte
	base   string // public_url + route_prefix + "/" + disk
	clock  resilience.Clock
	random bool // the key was generated for this process
}

func (s *signer) mac(key string, expires int64) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte("GET\n" + s.disk + "\n" + key + "\n" + strconv.FormatInt(expires, 10)))
	return h.Sum(nil)
}

func (s *signer) url(key string, ttl time.Duration) string {
	// Rounded up to the next second: a URL never expires before its ttl.
	expires := s.clock.Now().Add(ttl + time.Second - 1).Unix()
	sig := base64.RawURLEncoding.EncodeToString(s.mac(key, expires))
	return s.base + "/" + escapeKey(key) + "?expires=" + strconv.FormatInt(expires, 10) + "&signature=" + sig
}

// errBadSignature and errExpired are the two reasons a signed request is refused.
var (
	errBadSignature = errors.New("the signature does not match")
	errExpired      = errors.New("the link has expired")
)

// verify checks the signature first, in constant time, then the expiry, so a
// tampered URL learns nothing about expiry and an expired one nothing about
// the signature.
func (s *signer) verify(key string, q url.Values) error {
	expires, err := strconv.ParseInt(q.Get("expires"), 10, 64)
	if err != nil {
		return errBadSignature
	}
	got, err := base64.RawURLEncoding.DecodeString(q.Get("signature"))
	if err != nil {
		return errBadSignature
	}
	if !hmac.Equal(got, s.mac(key, expires)) {
		return errBadSignature
	}
	if s.clock.Now().Unix() >= expires {
		return errExpired
	}
	return nil
}

// escapeKey escapes each segment of a key for a URL path, keeping the slashes.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// serveSigned serves GET and HEAD <route_prefix>/<disk>/<key> for local disks:
// signature, expiry, key, then the file with Range and conditional requests.
func (p *Plugin) serveSigned(w http.ResponseWriter, r *http.Request) error {
	rest, ok := strings.CutPrefix(r.URL.Path, p.cfg.RoutePrefix+"/")
	if !ok {
		return problem.NotFound("no such object")
	}
	name, key, ok := strings.Cut(rest, "/")
	if !ok {
		return problem.NotFound("no such object")
	}
	d := p.disks[name]
	if d == nil {
		return problem.NotFound("no such object")
	}
	local, ok := d.drv.(*localDriver)
	if !ok {
		return problem.NotFound("no such object") // s3 temporary URLs go to S3 itself
	}
	if err := local.signer.verify(key, r.URL.Query()); err != nil {
		return problem.Forbidden(err.Error())
	}
	obj, err := d.Get(r.Context(), key)
	if errors.Is(err, fs.ErrNotExist) {
		return problem.NotFound("no such object")
	}
	if err != nil {
		return err
	}
	defer obj.Close()
	h := w.Header()
	h.Set("Content-Type", obj.ContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-store")
	if f, ok := obj.Body.(io.ReadSeeker); ok {
		http.ServeContent(w, r, "", obj.LastModified, f)
		return nil
	}
	return errors.New("storage: local object is not seekable")
}
