package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"mime"
	"net"
	"net/http"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
)

// dependency is the name storage errors carry in their 503 problem.
const dependency = "storage"

// ErrNotExist is what a missing object's error matches with errors.Is. It is
// fs.ErrNotExist, so code written for files works unchanged.
var ErrNotExist = fs.ErrNotExist

// ErrPrivate is returned by [Disk.URL] on a private disk: its objects have no
// permanent address; use [Disk.TemporaryURL].
var ErrPrivate = errors.New("storage disk is private: it has no public URLs; use TemporaryURL")

// Info describes a stored object.
type Info struct {
	// Key is the object's key on its disk.
	Key string
	// Size is the object's length in bytes.
	Size int64
	// ContentType is the media type given to Put (s3), or the one the key's
	// extension implies (local, which keeps no metadata). Empty in List results.
	ContentType string
	// LastModified is when the object was last written.
	LastModified time.Time
	// ETag is the S3 entity tag; empty on local disks.
	ETag string
}

// Object is an object being read: its Info and its body, streamed. The caller
// must Close it.
type Object struct {
	Info
	Body io.ReadCloser
}

// Read reads from the body.
func (o *Object) Read(p []byte) (int, error) { return o.Body.Read(p) }

// Close closes the body, releasing the file or connection.
func (o *Object) Close() error { return o.Body.Close() }

// driver is what a disk is built on: the local filesystem or an S3 bucket.
// Keys are validated before a driver sees them. Errors for missing objects wrap
// fs.ErrNotExist.
type driver interface {
	put(ctx context.Context, key string, body io.Reader, size int64, contentType string) error
	get(ctx context.Context, key string) (*Object, error)
	stat(ctx context.Context, key string) (Info, error)
	delete(ctx context.Context, key string) error
	// listPage returns one page of the objects under prefix after token, and
	// the token of the next page ("" at the end).
	listPage(ctx context.Context, prefix, token string) ([]Info, string, error)
	publicURL(key string) string
	temporaryURL(ctx context.Context, key string, ttl time.Duration) (string, error)
	// check is the bounded /ready probe: a HEAD of the bucket, a stat of the root.
	check(ctx context.Context) error
	close()
}

// Disk is one configured disk. Every method validates the key first, then runs
// the operation under the disk's breaker (s3) and turns failures into a
// *problem.DependencyError naming "storage" (503), except a missing object
// (errors.Is(err, ErrNotExist)), an invalid key (*KeyError, 400), a body that
// failed (*BodyError, 400/413) and, on a local disk, a key that conflicts
// with a stored object (*ConflictError, 409).
//
// A Disk is safe for concurrent use.
type Disk struct {
	name       string
	driverName string
	visibility Visibility
	drv        driver
	breaker    *resilience.Breaker // nil for local disks: no breaker
	// connect is an s3 disk's connect_timeout: the silence after which a
	// caller's deadline that cut an operation is breaker evidence (silentCut).
	connect time.Duration
	metrics *metrics
}

// Name returns the disk's name in [plugin.storage.disks.<name>].
func (d *Disk) Name() string { return d.name }

// Visibility returns the disk's visibility.
func (d *Disk) Visibility() Visibility { return d.visibility }

// Breaker returns the disk's breaker (nil for a local disk), for tests and
// operators' tools.
func (d *Disk) Breaker() *resilience.Breaker { return d.breaker }

// Put stores body under key, streaming it: the object is never held in memory
// whole. contentType may be empty: then the key's extension decides, else
// application/octet-stream.
//
// On s3, a body whose size is known (an io.Seeker such as *os.File, a Len
// method such as *bytes.Reader, or [Sized]) is sent as one request; a body of
// unknown size is sent in parts of 8 MiB (a multipart upload) through one
// reused buffer. On local disks the object is written to a temporary file in
// the same directory, synced and renamed, so readers never see half an object.
func (d *Disk) Put(ctx context.Context, key string, body io.Reader, contentType string) error {
	if err := validate(key, false); err != nil {
		return err
	}
	if contentType == "" {
		contentType = typeByKey(key)
	}
	size := sizeOf(body)
	if s, ok := body.(*sized); ok {
		body = s.r
	}
	src := watchBody(body)
	return d.do(ctx, opPut, key, src, func(ctx context.Context) error {
		err := d.drv.put(ctx, key, src, size, contentType)
		if rerr := src.failure(); err != nil && rerr != nil {
			// The body failed (a client that went away mid-upload): the
			// caller's problem, no evidence against the disk.
			return &BodyError{Err: rerr}
		}
		return err
	})
}

// BodyError is returned by Put when reading the body failed, for example
// because the client sending it went away. It is not a storage failure: it
// does not count against the breaker and is not a 503. Nothing was stored.
type BodyError struct {
	Err error
}

// Error returns "read the body: <cause>".
func (e *BodyError) Error() string { return "read the body: " + e.Err.Error() }

// Unwrap returns the body's error.
func (e *BodyError) Unwrap() error { return e.Err }

// Problem implements problem.Renderer: the body's own problem when its error
// renders as one (413 over the route's limit, 408 for a body that did not
// arrive within the request's deadline), else 400.
func (e *BodyError) Problem() *problem.Problem {
	p := problem.From(e.Err)
	if p.Status == http.StatusInternalServerError {
		p = problem.BadRequest("the request body could not be read")
	}
	p.Err = e
	return p
}

// watchedBody remembers the first error the body returned other than io.EOF,
// and tells the operation's progress (s3) when it is waiting on the body: that
// time is the caller's, not S3's silence. The HTTP transport may still read the
// body after the request returned (its writer runs on its own goroutine), hence
// the lock.
type watchedBody struct {
	r   io.Reader
	pr  *progress // set by Disk.do before the operation runs; nil on a local disk
	mu  sync.Mutex
	err error
}

func (w *watchedBody) Read(p []byte) (int, error) {
	if w.pr != nil {
		w.pr.bodyReadStart()
		defer w.pr.bodyReadDone()
	}
	n, err := w.r.Read(p)
	if err != nil && err != io.EOF {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
	return n, err
}

func (w *watchedBody) track(p *progress) { w.pr = p }

func (w *watchedBody) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// watchedSeeker keeps the body seekable, so the SDK can rewind it to retry.
type watchedSeeker struct {
	watchedBody
}

func (w *watchedSeeker) Seek(offset int64, whence int) (int64, error) {
	return w.r.(io.Seeker).Seek(offset, whence)
}

type watched interface {
	io.Reader
	track(*progress)
	failure() error
}

func watchBody(r io.Reader) watched {
	if _, ok := r.(io.Seeker); ok {
		return &watchedSeeker{watchedBody{r: r}}
	}
	return &watchedBody{r: r}
}

// Get opens key for reading. The object is streamed: the caller must Close it.
// A stall longer than read_timeout while reading the body fails the read.
//
// On an s3 disk the breaker learns from the whole body, not only from the
// response headers: the operation counts as a success once the body has been
// read to its end, as a failure when reading it fails on S3's side (the read
// gap, a reset or early end of the connection, a caller's deadline after
// connect_timeout of S3's silence), and as nothing when the caller stops
// early (it closed the body, its cancel or short deadline cut it). See
// downloadBody.
func (d *Disk) Get(ctx context.Context, key string) (*Object, error) {
	if err := validate(key, false); err != nil {
		return nil, err
	}
	var obj *Object
	held, err := d.run(ctx, opGet, key, nil, true, func(ctx context.Context) (err error) {
		obj, err = d.drv.get(ctx, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	if held != nil {
		held.rc, held.size = obj.Body, obj.Size
		obj.Body = held
	}
	return obj, nil
}

// downloadBody is an s3 Get's body, which reports the operation's outcome to
// the breaker when the body is done: read to io.EOF (or closed after Size
// bytes), a Success; a read that failed, what classify says of its error; closed
// before its end, Ignore (the caller stopped reading: a write to its own
// destination failed, or it wanted only part). Reads of the body run on the
// caller's goroutine, each bounded by the connection's read gap, and end with
// the caller's context (the transport closes the connection then).
//
// A closed breaker's ticket holds nothing, so it is kept until the body is
// done. A half-open breaker's probe is not: a long download would hold the
// probe and refuse every other operation meanwhile, so a probe is settled as a
// Success when the headers arrive (S3 answered), and a failure of its body
// afterwards counts as a fresh one, with a ticket of its own.
type downloadBody struct {
	rc      io.ReadCloser
	size    int64        // the object's length, from Content-Length (S3 always sends it for a GetObject)
	n       atomic.Int64 // bytes read so far
	ctx     context.Context
	pr      *progress
	connect time.Duration
	breaker *resilience.Breaker
	ticket  resilience.Ticket
	late    bool // ticket was a probe, settled at the headers
	done    atomic.Bool
}

func (b *downloadBody) Read(p []byte) (int, error) {
	// The time since the previous read was the caller's (writing out what it
	// read), not S3's silence.
	b.pr.waiting()
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	switch {
	case err == io.EOF:
		b.settle(resilience.Success)
	case err != nil:
		o := classify(b.ctx, err, b.pr, b.connect)
		if o == resilience.Hang {
			o = resilience.Failure // S3 answered the headers: a failure, not silence
		}
		b.settle(o)
	}
	return n, err
}

// Close closes the body. Closing it before its end is no evidence either way;
// closing it after Size bytes without having read io.EOF is a Success.
func (b *downloadBody) Close() error {
	if b.n.Load() >= b.size {
		b.settle(resilience.Success)
	} else {
		b.settle(resilience.Ignore)
	}
	return b.rc.Close()
}

// settle reports the operation's outcome, once: a Read failing on one
// goroutine and a Close on another may both try.
func (b *downloadBody) settle(o resilience.Outcome) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	if !b.late {
		// Done, not DoneAttempt: o is never a Hang here (Read makes a body
		// that went silent after the headers a Failure: S3 answered).
		b.ticket.Done(o)
		return
	}
	if o == resilience.Failure || o == resilience.Hang {
		// The probe closed the breaker at the headers; the body failing
		// since is evidence of now. An open breaker refuses the ticket: it
		// knows already.
		if t, err := b.breaker.Allow(); err == nil {
			t.Done(o)
		}
	}
}

// Stat returns what is known about key without reading it.
func (d *Disk) Stat(ctx context.Context, key string) (Info, error) {
	if err := validate(key, false); err != nil {
		return Info{}, err
	}
	var info Info
	err := d.do(ctx, opStat, key, nil, func(ctx context.Context) (err error) {
		info, err = d.drv.stat(ctx, key)
		return err
	})
	return info, err
}

// Exists reports whether key exists. An error means the disk could not say.
func (d *Disk) Exists(ctx context.Context, key string) (bool, error) {
	_, err := d.Stat(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotExist):
		return false, nil
	}
	return false, err
}

// Delete removes key. Deleting a missing key is not an error (as on S3).
func (d *Disk) Delete(ctx context.Context, key string) error {
	if err := validate(key, false); err != nil {
		return err
	}
	return d.do(ctx, opDelete, key, nil, func(ctx context.Context) error {
		return d.drv.delete(ctx, key)
	})
}

// List yields every object whose key starts with prefix ("" for all; a prefix
// is matched by bytes, so "reports/2026" matches "reports/2026-01.csv"). s3
// fetches pages of up to 1000 keys as the loop goes, each under the breaker;
// local disks walk the directory under the prefix, in lexical order per
// directory. A failure is yielded once, as the last pair.
func (d *Disk) List(ctx context.Context, prefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		if err := validate(prefix, true); err != nil {
			yield(Info{}, err)
			return
		}
		token := ""
		for {
			var page []Info
			var next string
			err := d.do(ctx, opList, prefix, nil, func(ctx context.Context) (err error) {
				page, next, err = d.drv.listPage(ctx, prefix, token)
				return err
			})
			if err != nil {
				yield(Info{}, err)
				return
			}
			for _, info := range page {
				if !yield(info, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			token = next
		}
	}
}

// URL returns the permanent public address of key: base_url + "/" + key (each
// segment escaped), or for an s3 disk without base_url the bucket's own
// address. It does no I/O and does not check that key exists. On a private
// disk it returns ErrPrivate.
func (d *Disk) URL(key string) (string, error) {
	if err := validate(key, false); err != nil {
		return "", err
	}
	if d.visibility != Public {
		return "", fmt.Errorf("storage disk %q: %w", d.name, ErrPrivate)
	}
	return d.drv.publicURL(key), nil
}

// TemporaryURL returns an address that serves key with GET until ttl has
// passed, on any disk. s3: a presigned GetObject URL (ttl at most 7 days).
// local: a URL of the route the plugin mounts (route_prefix), signed with
// HMAC-SHA256 over the disk, key and expiry. It does no I/O on the object.
func (d *Disk) TemporaryURL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if err := validate(key, false); err != nil {
		return "", err
	}
	if ttl <= 0 {
		return "", fmt.Errorf("storage disk %q: temporary URL lifetime must be positive, got %s", d.name, ttl)
	}
	u, err := d.drv.temporaryURL(ctx, key, ttl)
	if err != nil {
		return "", fmt.Errorf("storage disk %q: temporary URL: %w", d.name, err)
	}
	return u, nil
}

// Operation names, for errors and the metric label.
const (
	opPut    = "put"
	opGet    = "get"
	opStat   = "stat"
	opDelete = "delete"
	opList   = "list"
)

// do runs one operation under the breaker and turns its error into what the
// caller gets. The breaker's ticket is settled when fn returns. body is Put's
// body (nil for the other operations).
func (d *Disk) do(ctx context.Context, op, key string, body watched, fn func(context.Context) error) error {
	_, err := d.run(ctx, op, key, body, false, fn)
	return err
}

// run is do. With hold, an operation that succeeded on a disk with a breaker
// does not settle its ticket: the returned downloadBody does, when the body it
// will wrap is done (Get). Otherwise the *downloadBody is nil.
func (d *Disk) run(ctx context.Context, op, key string, body watched, hold bool, fn func(context.Context) error) (*downloadBody, error) {
	start := time.Now()
	ticket, err := d.breaker.Allow()
	if err != nil {
		d.metrics.observe(d.name, op, outcomeRejected, start)
		var ra time.Duration
		var oe *resilience.OpenError
		if errors.As(err, &oe) {
			ra = oe.RetryAfter()
		}
		return nil, &problem.DependencyError{Dependency: dependency, Err: fmt.Errorf("storage disk %q: %s %q: %w", d.name, op, key, err), RetryAfter: ra}
	}
	opCtx, pr := ctx, (*progress)(nil)
	if d.breaker != nil {
		opCtx, pr = track(ctx, start)
		if body != nil {
			body.track(pr)
		}
	}
	err = fn(opCtx)
	var held *downloadBody
	if hold && err == nil && d.breaker != nil {
		held = &downloadBody{ctx: ctx, pr: pr, connect: d.connect, breaker: d.breaker, ticket: ticket}
		if ticket.Probe() {
			ticket.Done(resilience.Success)
			held.late = true
		}
	} else {
		// DoneAttempt: a hang with nothing answered since the operation
		// was admitted opens the breaker for a full cool-down (the silence
		// rule), so a request's next operation is refused at once instead
		// of being the half-open probe and paying the same bound again.
		ticket.DoneAttempt(classify(ctx, err, pr, d.connect))
	}
	switch {
	case err == nil:
		d.metrics.observe(d.name, op, outcomeOK, start)
		return held, nil
	case errors.Is(err, ErrNotExist):
		d.metrics.observe(d.name, op, outcomeNotFound, start)
		return nil, fmt.Errorf("storage disk %q: %s %q: %w", d.name, op, key, err)
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrConflict), errors.As(err, new(*BodyError)):
		// The caller's: each renders as its own 4xx, not as the disk's 503.
		d.metrics.observe(d.name, op, outcomeError, start)
		return nil, fmt.Errorf("storage disk %q: %s %q: %w", d.name, op, key, err)
	}
	d.metrics.observe(d.name, op, outcomeError, start)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// The caller gave up: not the dependency's fault, and nobody reads a 503.
		return nil, fmt.Errorf("storage disk %q: %s %q: %w", d.name, op, key, err)
	}
	return nil, &problem.DependencyError{Dependency: dependency, Err: fmt.Errorf("storage disk %q: %s %q: %w", d.name, op, key, err)}
}

// classify decides what an operation's result means for the breaker: a missing
// object or any other answer S3 sent whole is judged by its status through
// resilience.HTTPOutcome, the rule every plugin shares (a 502, 503 or 504 is a
// failure; a 500, a 4xx, a 429 prove S3 is up); a failing upload body is no
// evidence; a transport error or a timeout of the disk's own (the read gap,
// connect_timeout) is a failure, and a timeout before S3 began any response is
// a hang (resilience.Hang). An answer whose transfer broke (interrupted) is no
// answer: S3 began one and did not finish it, which is judged like a transport
// error. An operation cut
// by its caller (resilience.CutByCaller) is judged by silentCut: a cancel is
// no evidence, a deadline is a failure when S3 had been silent (pr) for
// connect_timeout (connect) or longer.
//
// The disk's own deadlines move with progress (a gap between bytes, a connect
// per attempt), so there is no fixed deadline to compare with: when the
// caller's context ended, none of them had fired, or the operation would have
// failed earlier with the caller still waiting. Hence the zero own deadline,
// and the silence instead.
func classify(ctx context.Context, err error, pr *progress, connect time.Duration) resilience.Outcome {
	switch {
	case err == nil, errors.Is(err, ErrNotExist), errors.Is(err, ErrInvalidKey), errors.Is(err, ErrConflict):
		return resilience.Success
	case errors.As(err, new(*BodyError)):
		return resilience.Ignore
	}
	if status, ok := httpStatus(err); ok && resilience.HTTPOutcome(status, nil) == resilience.Success && !interrupted(err) {
		return resilience.Success
	}
	_, answered := httpStatus(err) // S3 began a response: a failure, never silence
	if resilience.CutByCaller(ctx, time.Time{}) {
		if pr == nil {
			return resilience.Ignore // a local disk: no breaker, nothing to learn
		}
		if o := silentCut(ctx, pr.silence(time.Now()), connect); o != resilience.Hang || !answered {
			return o
		}
		return resilience.Failure
	}
	if !answered && (resilience.IsTimeout(err) || pr != nil && pr.gapFired()) {
		// The read gap or connect_timeout expired before any answer. A gap
		// that fired on the reader while an upload was still being written
		// fails the write with "use of closed network connection": asked of
		// the connections, not of the error.
		return resilience.Hang
	}
	return resilience.Failure
}

// interrupted reports whether err ended a transfer before its end: the
// connection failed or timed out (a net.Error: the read gap, a reset, whose
// syscall.Errno is one too; context.DeadlineExceeded is one, context.Canceled
// is asked apart), or it ended early (io.ErrUnexpectedEOF, what net/http
// reports for a body shorter than its Content-Length or a chunked body cut
// off). An error S3 sent whole, even one that could not be decoded (a proxy's
// HTML page), holds none of them.
func interrupted(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.Canceled)
}

// Sized tells Put the length of a body whose length it cannot find out itself
// (an io.Pipe, a request body with Content-Length), so s3 sends it as one
// streamed request instead of a multipart upload. n must be exact.
// A negative n means unknown, so Sized(r.Body, r.ContentLength) is right for a
// request of either kind.
func Sized(r io.Reader, n int64) io.Reader { return &sized{r: r, n: max(n, -1)} }

type sized struct {
	r io.Reader
	n int64
}

func (s *sized) Read(p []byte) (int, error) { return s.r.Read(p) }

// sizeOf returns the bytes left in body, or -1 when it cannot be known without
// reading it.
func sizeOf(body io.Reader) int64 {
	switch b := body.(type) {
	case *sized:
		return b.n
	case interface{ Len() int }: // *bytes.Reader, *bytes.Buffer, *strings.Reader
		return int64(b.Len())
	case io.Seeker:
		cur, err := b.Seek(0, io.SeekCurrent)
		if err != nil {
			return -1
		}
		end, err := b.Seek(0, io.SeekEnd)
		if err != nil {
			return -1
		}
		if _, err := b.Seek(cur, io.SeekStart); err != nil {
			return -1
		}
		return end - cur
	}
	return -1
}

// typeByKey is the media type the key's extension implies, else
// application/octet-stream.
func typeByKey(key string) string {
	if t := mime.TypeByExtension(path.Ext(key)); t != "" {
		return t
	}
	return "application/octet-stream"
}
