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

	"github.com/jfastframework/jfast/framework"
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
	// ETag is the object's entity tag, quoted: S3's, or on a local disk one
	// derived from the file's inode, size and modification time, which every
	// Put changes (see localETag).
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
	// put stores body; an s3 driver makes each of its requests (one, or a
	// multipart upload's) through req.
	put(ctx context.Context, key string, body watched, size int64, contentType string, req requester) error
	get(ctx context.Context, key string) (*Object, error)
	stat(ctx context.Context, key string) (Info, error)
	delete(ctx context.Context, key string) error
	// listPage returns one page of the objects under prefix after token, and
	// the token of the next page ("" at the end).
	listPage(ctx context.Context, prefix, token string) ([]Info, string, error)
	publicURL(key string) string
	temporaryURL(ctx context.Context, key string, ttl time.Duration) (string, error)
	// check is the bounded /ready probe: a HEAD of the bucket, a read of the root.
	check(ctx context.Context) error
	close()
}

// Disk is one configured disk. Every method validates the key first, then runs
// the operation's requests under the disk's policy (s3) and turns failures into a
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
	policy     *resilience.Policy           // nil for local disks: no policy, no breaker
	dep        *framework.DependencyMetrics // the policy metrics (s3); nil for local disks
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
func (d *Disk) Breaker() *resilience.Breaker {
	if d.policy == nil {
		return nil
	}
	return d.policy.Breaker()
}

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
		body = s.exact(ctx)
	}
	src := watchBody(body)
	start := time.Now()
	err := d.drv.put(ctx, key, src, size, contentType, d.request)
	if rerr := src.failure(); err != nil && rerr != nil && !errors.As(err, new(*BodyError)) {
		// The body failed between two requests (a multipart upload reads
		// each part before sending it): the caller's problem.
		err = &BodyError{Err: rerr}
	}
	return d.result(ctx, opPut, key, start, err)
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
	pr  atomic.Pointer[progress] // set by each attempt before it runs; nil on a local disk
	mu  sync.Mutex
	err error
}

func (w *watchedBody) Read(p []byte) (int, error) {
	if pr := w.pr.Load(); pr != nil {
		pr.bodyReadStart()
		defer pr.bodyReadDone()
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

func (w *watchedBody) track(p *progress) { w.pr.Store(p) }

func (w *watchedBody) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// watchedSeeker keeps the body seekable, so a retry can rewind it.
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
	var held *downloadBody
	start := time.Now()
	err := d.request(ctx, request{hold: &held}, func(ctx context.Context) (err error) {
		obj, err = d.drv.get(ctx, key)
		return err
	})
	if err := d.result(ctx, opGet, key, start, err); err != nil {
		return nil, err
	}
	if held != nil {
		held.rc, held.size = obj.Body, obj.Size
		obj.Body = held
	}
	return obj, nil
}

// downloadBody is an s3 Get's body, which ends the Get's call of the disk's
// policy when the body is done, reporting its outcome to the breaker: read to io.EOF (or closed after Size
// bytes), a Success; a read that failed, what classify says of its error; closed
// before its end, Ignore (the caller stopped reading: a write to its own
// destination failed, or it wanted only part). Reads of the body run on the
// caller's goroutine, each bounded by the connection's read gap, and end with
// the caller's context (the transport closes the connection then).
//
// The call keeps its bulkhead place until then. A closed breaker's ticket
// holds nothing, so it is kept until the body is done. A half-open
// breaker's probe is not: a long download would hold the
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
	call    *heldCall
}

// heldCall is a Get's call of the disk's policy, held until its body is
// done, apart from the body itself so that a cleanup can end it when the
// caller drops the body without closing it: otherwise its bulkhead place
// would be lost for good, and max_concurrent such leaks would refuse every
// operation on the disk.
type heldCall struct {
	run  *resilience.Run
	done atomic.Bool
}

// end ends the call once, with o.
func (c *heldCall) end(o resilience.Outcome) bool {
	if !c.done.CompareAndSwap(false, true) {
		return false
	}
	c.run.EndTransfer(o) // a probe settled at the headers counts only a failure since
	return true
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
	// End, not a Hang: Read makes a body that went silent after the
	// headers a Failure (S3 answered).
	b.call.end(o)
}

// Stat returns what is known about key without reading it.
func (d *Disk) Stat(ctx context.Context, key string) (Info, error) {
	if err := validate(key, false); err != nil {
		return Info{}, err
	}
	var info Info
	err := d.do(ctx, opStat, key, func(ctx context.Context) (err error) {
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
	return d.do(ctx, opDelete, key, func(ctx context.Context) error {
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
			err := d.do(ctx, opList, prefix, func(ctx context.Context) (err error) {
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

// do runs an operation of one request under the disk's policy and turns its
// error into what the caller gets.
func (d *Disk) do(ctx context.Context, op, key string, fn func(context.Context) error) error {
	start := time.Now()
	return d.result(ctx, op, key, start, d.request(ctx, request{}, fn))
}

// result counts an operation that began at start and ended with err, and
// turns err into what the caller gets: a refusal of the policy (an open
// breaker, a full bulkhead, the throttle) or a failure is a
// *problem.DependencyError naming "storage" (with the breaker's Retry-After
// when it is open); a missing object, the caller's own errors and a cancel
// by the caller keep their error.
func (d *Disk) result(ctx context.Context, op, key string, start time.Time, err error) error {
	wrap := func(err error) error { return fmt.Errorf("storage disk %q: %s %q: %w", d.name, op, key, err) }
	switch {
	case err == nil:
		d.count(op, outcomeOK, start)
		return nil
	case errors.Is(err, resilience.ErrOpen), errors.Is(err, resilience.ErrBulkheadFull), errors.Is(err, resilience.ErrThrottled):
		switch {
		case errors.Is(err, resilience.ErrOpen):
			d.count(op, outcomeCircuitOpen, start)
		case errors.Is(err, resilience.ErrBulkheadFull):
			d.count(op, outcomeBulkhead, start)
			d.dep.Rejected()
		default:
			d.count(op, outcomeThrottled, start)
		}
		var ra time.Duration
		if oe, ok := errors.AsType[resilience.RetryAfterError](err); ok {
			ra = oe.RetryAfter()
		}
		return &problem.DependencyError{Dependency: dependency, Err: wrap(err), RetryAfter: ra}
	case errors.Is(err, ErrNotExist):
		d.count(op, outcomeNotFound, start)
		return wrap(err)
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrConflict), errors.As(err, new(*BodyError)):
		// The caller's: each renders as its own 4xx, not as the disk's 503.
		d.count(op, outcomeError, start)
		return wrap(err)
	}
	d.count(op, outcomeError, start)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// The caller gave up: not the dependency's fault, and nobody reads a 503.
		return wrap(err)
	}
	return &problem.DependencyError{Dependency: dependency, Err: wrap(err)}
}

// count counts an operation in the disk's metrics and, for an s3 disk, in
// the policy metrics every plugin shares (jfast_client_calls_total, with
// the outcome label of jfast_storage_operations_total).
func (d *Disk) count(op, outcome string, start time.Time) {
	d.metrics.observe(d.name, op, outcome, start)
	if d.dep != nil {
		d.dep.Calls(outcome).Inc()
	}
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
// ctx is the caller's context. The disk's own deadlines other than the
// policy's timeout move with progress (a gap between bytes, a connect per
// attempt), so there is no fixed deadline to compare with: when the
// caller's context ended, none of them had fired, or the operation would
// have failed earlier with the caller still waiting. Hence the zero own
// deadline, and the silence instead.
func classify(ctx context.Context, err error, pr *progress, connect time.Duration) resilience.Outcome {
	return judge(ctx, time.Time{}, nil, err, pr, connect)
}

// judge is classify of a request of the disk's policy: own is the policy's
// timeout of the request (zero once its body moved); call is the request's
// context, whose cause tells the policy's timeout ending an open-ended
// request before any answer, a hang as the read gap's is.
func judge(ctx context.Context, own time.Time, call context.Context, err error, pr *progress, connect time.Duration) resilience.Outcome {
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
	if resilience.CutByCaller(ctx, own) {
		if pr == nil {
			return resilience.Ignore // a local disk: no breaker, nothing to learn
		}
		if o := silentCut(ctx, pr.silence(time.Now()), connect); o != resilience.Hang || !answered {
			return o
		}
		return resilience.Failure
	}
	timedOut := call != nil && errors.Is(context.Cause(call), resilience.ErrTimeout)
	if !answered && (resilience.IsTimeout(err) || timedOut || pr != nil && pr.gapFired()) {
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

// exact returns the body Put reads: s's reader, held to its declared length
// when there is one. Sent as is, a body shorter than declared was stored
// short on a local disk and failed as S3's fault on s3 (a 503 the breaker
// counted), and a longer one was stored cut at the declared length on s3
// while Put failed; either is now a body that failed (a BodyError, nothing
// stored). A seekable reader stays seekable, so a retry can rewind it.
func (s *sized) exact(ctx context.Context) io.Reader {
	if s.n < 0 {
		return s.r
	}
	e := &exactBody{ctx: ctx, r: s.r, n: s.n, left: s.n}
	if sk, ok := s.r.(io.Seeker); ok {
		if pos, err := sk.Seek(0, io.SeekCurrent); err == nil {
			return &exactSeeker{exactBody: e, sk: sk, start: pos}
		}
	}
	return e
}

// exactBody reads r, which must hold exactly n bytes: one fewer ends with an
// error, and one more is found before the last byte is given out, so that
// the request carrying the body never completes with a length it does not
// have. A body that ends short once ctx, Put's, is done ends as it does
// (io.EOF): the caller's deadline or cancellation, which cut the operation,
// most likely cut the body's producer too (an io.Pipe closed on it), and the
// operation's error is then that, not the body's.
type exactBody struct {
	ctx     context.Context
	r       io.Reader
	n, left int64
}

func (e *exactBody) Read(p []byte) (int, error) {
	if e.left == 0 {
		return 0, e.atEnd()
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	m, err := e.r.Read(p)
	e.left -= int64(m)
	switch {
	case err != nil && err != io.EOF:
		return m, err
	case e.left == 0:
		if end := e.atEnd(); end != io.EOF {
			return 0, end
		}
		return m, nil
	case err == io.EOF && e.ctx.Err() != nil:
		return m, io.EOF
	case err == io.EOF:
		return m, fmt.Errorf("the body ended after %d of the %d bytes Sized declared: %w", e.n-e.left, e.n, io.ErrUnexpectedEOF)
	}
	return m, err
}

// atEnd reads r past the declared length: io.EOF when it ends there.
func (e *exactBody) atEnd() error {
	var one [1]byte
	for {
		m, err := e.r.Read(one[:])
		switch {
		case m > 0:
			return fmt.Errorf("the body is longer than the %d bytes Sized declared", e.n)
		case err != nil:
			return err
		}
	}
}

// exactSeeker is an exactBody over a seekable reader.
type exactSeeker struct {
	*exactBody
	sk    io.Seeker
	start int64 // where the reader stood when Put got it
}

func (e *exactSeeker) Seek(offset int64, whence int) (int64, error) {
	pos, err := e.sk.Seek(offset, whence)
	if err == nil {
		e.left = max(e.n-(pos-e.start), 0)
	}
	return pos, err
}

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
