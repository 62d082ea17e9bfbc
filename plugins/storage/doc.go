// Package storage is jfast's storage plugin: named disks on the local
// filesystem or in S3 (or an S3-compatible server), with deadlines, a breaker
// and signed URLs.
//
// Each [plugin.storage.disks.<name>] table is a [Disk]. A handler gets its disk
// at boot, in the service's Routes function, and streams objects in and out:
//
//	uploads, err := storage.For(app, "uploads")
//	if err != nil {
//		return err // no such disk: the boot fails naming it
//	}
//	r.Method(http.MethodPut, "/avatars/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
//		key := "avatars/" + chi.URLParam(r, "id")
//		body := storage.Sized(r.Body, r.ContentLength)
//		if err := uploads.Put(r.Context(), key, body, r.Header.Get("Content-Type")); err != nil {
//			return err // an outage is a 503 problem naming "storage"
//		}
//		u, err := uploads.TemporaryURL(r.Context(), key, 15*time.Minute)
//		if err != nil {
//			return err
//		}
//		return framework.JSON(w, http.StatusCreated, map[string]string{"url": u})
//	}))
//
// # Keys
//
// A key is a "/"-separated path checked before any I/O by [ValidateKey]: no
// "..", ".", empty segment, leading "/", backslash or NUL. A traversal attempt
// is a [*KeyError] (400), never a file outside the root; the local driver also
// goes through an os.Root, so a symbolic link cannot lead out either.
//
// # Failures
//
// An s3 disk has connect_timeout (5 s), read_timeout (30 s, the gap between
// bytes: a transfer that keeps moving is never cut) and the outbound policy
// every plugin shares ([resilience.Policy]: attempts 3, a timeout of 10 s
// until the object's bytes move, backoff, retry budget, bulkhead, breaker),
// each S3 request one call of it. A hung or failing S3 costs at most those
// deadlines; then the open breaker answers at once. Every failure is a
// *problem.DependencyError naming "storage" (503 problem+json, with
// Retry-After while the breaker is open); a missing object matches
// [ErrNotExist]. An operation cut by its caller's deadline is a 503 too, and
// counts against the breaker only when S3 had been silent for connect_timeout
// before the cut; a cancelled caller never counts ([resilience.CutByCaller],
// docs/storage.md). A response S3 began and did not finish (a Get or List body
// that stalls past read_timeout, is reset or ends early) counts as a failure;
// a Get body the caller closes early does not. On a local disk, a Put whose key conflicts with a stored
// object ("a/b" while "a" is stored) is the caller's [*ConflictError], a 409.
//
// See docs/storage.md for every key, its default and its reason.
package storage
