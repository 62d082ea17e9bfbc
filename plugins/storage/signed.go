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

// signature is the signature of key on the disk called disk, which is
// s.disk for the URLs s makes, in the form the URL carries.
func (s *signer) signature(disk, key string, expires int64) string {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte("GET\n" + disk + "\n" + key + "\n" + strconv.FormatInt(expires, 10)))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

func (s *signer) url(key string, ttl time.Duration) string {
	// Rounded up to the next second: a URL never expires before its ttl.
	expires := s.clock.Now().Add(ttl + time.Second - 1).Unix()
	return s.base + "/" + escapeKey(key) + "?expires=" + strconv.FormatInt(expires, 10) + "&signature=" + s.signature(s.disk, key, expires)
}

// errBadSignature and errExpired are the two reasons a signed request is refused.
var (
	errBadSignature = errors.New("the signature does not match")
	errExpired      = errors.New("the link has expired")
)

// verify checks the signature of key on disk with s's key first, in constant
// time, then the expiry, so a tampered URL learns nothing about expiry and an
// expired one nothing about the signature. Both parameters must be spelled
// exactly as url spells them: another spelling of the same value (a sign or
// leading zeros in expires; a line break, or other unused bits in the last
// character, in the signature) is a tampered URL, so the signature is
// compared as text, not decoded.
func (s *signer) verify(disk, key string, q url.Values) error {
	raw := q.Get("expires")
	expires, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || strconv.FormatInt(expires, 10) != raw {
		return errBadSignature
	}
	if !hmac.Equal([]byte(q.Get("signature")), []byte(s.signature(disk, key, expires))) {
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

// signerOf returns the signer of the local disk called name, or nil when no
// local disk has that name.
func (p *Plugin) signerOf(name string) *signer {
	if d := p.disks[name]; d != nil {
		if local, ok := d.drv.(*localDriver); ok {
			return local.signer
		}
	}
	return nil
}

// verifySigned checks the signature and expiry of a signed URL for key on the
// disk named disk, before the disk or the object is looked up: the signature
// covers the disk's name, so a URL whose disk was changed is refused like any
// other tampered parameter, whether or not the new name is a disk. A name that
// is no local disk (tampered, an s3 disk's, or a disk since removed from the
// configuration) has no key of its own: every local disk's key is tried, and
// one that verifies the signature made the URL for a disk that is gone.
func (p *Plugin) verifySigned(disk, key string, q url.Values) error {
	if s := p.signerOf(disk); s != nil {
		return s.verify(disk, key, q)
	}
	for _, name := range p.names {
		if s := p.signerOf(name); s != nil {
			if err := s.verify(disk, key, q); !errors.Is(err, errBadSignature) {
				return err
			}
		}
	}
	return errBadSignature
}

// serveSigned serves GET and HEAD <route_prefix>/<disk>/<key> for local disks:
// signature and expiry, then the disk and the key, then the file with Range
// and conditional requests.
func (p *Plugin) serveSigned(w http.ResponseWriter, r *http.Request) error {
	rest, ok := strings.CutPrefix(r.URL.Path, p.cfg.RoutePrefix+"/")
	if !ok {
		return problem.NotFound("no such object")
	}
	name, key, ok := strings.Cut(rest, "/")
	if !ok {
		return problem.NotFound("no such object")
	}
	if err := p.verifySigned(name, key, r.URL.Query()); err != nil {
		return problem.Forbidden(err.Error())
	}
	if p.signerOf(name) == nil {
		// Signed by this service for a disk that is no longer one of its
		// local disks: the object went with the disk.
		return problem.NotFound("no such object")
	}
	obj, err := p.disks[name].Get(r.Context(), key)
	if errors.Is(err, fs.ErrNotExist) {
		return problem.NotFound("no such object")
	}
	if err != nil {
		return err
	}
	defer obj.Close()
	h := w.Header()
	h.Set("Content-Type", obj.ContentType)
	h.Set("ETag", obj.ETag) // for If-None-Match, If-Match and If-Range
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-store")
	if f, ok := obj.Body.(io.ReadSeeker); ok {
		http.ServeContent(w, r, "", obj.LastModified, f)
		return nil
	}
	return errors.New("storage: local object is not seekable")
}
