package storage

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// partSize is the part of a multipart upload of a body of unknown size: S3's
// minimum is 5 MiB; 8 MiB is the AWS CLI's default. One buffer per upload in
// flight, reused through a pool.
const partSize = 8 << 20

// maxPresign is S3's limit on a presigned URL's lifetime with SigV4.
const maxPresign = 7 * 24 * time.Hour

var partPool = sync.Pool{New: func() any { b := make([]byte, partSize); return &b }}

// s3Driver keeps objects in a bucket, through aws-sdk-go-v2 with jfast's
// deadlines: connect_timeout on every dial, read_timeout as the gap between
// bytes on every connection (see gapDialer), attempts through the SDK's
// standard retryer.
type s3Driver struct {
	client    *s3.Client
	presign   *s3.PresignClient
	transport *http.Transport
	bucket    string
	urlOf     func(key string) string
	gap       time.Duration
	pageSize  int32 // keys per List page: S3's maximum, 1000
}

func newS3Driver(ctx context.Context, cfg DiskConfig, apiOptions ...func(*middleware.Stack) error) (*s3Driver, error) {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           gapDialer{connect: cfg.ConnectTimeout, gap: cfg.ReadTimeout}.DialContext,
		TLSHandshakeTimeout:   cfg.ConnectTimeout,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       min(90*time.Second, cfg.ReadTimeout/2), // closed before its read deadline can fire
		ExpectContinueTimeout: time.Second,
	}
	if bundle := os.Getenv("AWS_CA_BUNDLE"); bundle != "" {
		// The SDK honours AWS_CA_BUNDLE only in its own HTTP client; this
		// transport does the same, so a private CA in front of an
		// S3-compatible server keeps working.
		pem, err := os.ReadFile(bundle)
		if err != nil {
			return nil, fmt.Errorf("read AWS_CA_BUNDLE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("AWS_CA_BUNDLE %s holds no PEM certificate", bundle)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	httpClient := &http.Client{Transport: tr}
	opts := s3.Options{
		Region:       cfg.Region,
		HTTPClient:   httpClient,
		UsePathStyle: cfg.PathStyle,
		// One attempt per SDK call: the disk's policy makes the retries,
		// under its deadline and retry budget (Disk.request).
		Retryer: aws.NopRetryer{},
		// Request checksums only where S3 requires them: a streamed body
		// cannot be hashed ahead without reading it twice, and many
		// S3-compatible servers refuse aws-chunked trailers. Responses are
		// checked whenever S3 sends a checksum (the SDK's default).
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	if cfg.AccessKey != "" {
		opts.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, ""))
	} else {
		// The default chain (environment, shared files, SSO, instance and task
		// roles). Loading it reads files only; credentials are fetched on the
		// first request, so an unreachable metadata service does not stop the boot.
		ac, err := config.LoadDefaultConfig(ctx, config.WithRegion(cfg.Region))
		if err != nil {
			return nil, fmt.Errorf("load the AWS default configuration: %w", err)
		}
		opts.Credentials = ac.Credentials
	}
	opts.APIOptions = append(opts.APIOptions, apiOptions...)
	client := s3.New(opts)
	d := &s3Driver{
		client:    client,
		presign:   s3.NewPresignClient(client),
		transport: tr,
		bucket:    cfg.Bucket,
		gap:       cfg.ReadTimeout,
		pageSize:  1000,
	}
	d.urlOf = bucketURL(cfg)
	return d, nil
}

// bucketURL returns the function behind URL: base_url when set, else the
// bucket's own address.
func bucketURL(cfg DiskConfig) func(string) string {
	if cfg.BaseURL != "" {
		base := strings.TrimSuffix(cfg.BaseURL, "/")
		return func(key string) string { return base + "/" + escapeKey(key) }
	}
	var base string
	switch u, _ := url.Parse(cfg.Endpoint); {
	case cfg.Endpoint == "":
		base = "https://" + cfg.Bucket + ".s3." + cfg.Region + ".amazonaws.com"
	case cfg.PathStyle:
		base = strings.TrimSuffix(cfg.Endpoint, "/") + "/" + url.PathEscape(cfg.Bucket)
	default:
		base = u.Scheme + "://" + cfg.Bucket + "." + u.Host + strings.TrimSuffix(u.Path, "/")
	}
	return func(key string) string { return base + "/" + escapeKey(key) }
}

func (d *s3Driver) publicURL(key string) string { return d.urlOf(key) }

func (d *s3Driver) close() { d.transport.CloseIdleConnections() }

// unsignedPayload signs uploads with UNSIGNED-PAYLOAD instead of hashing the
// body first: hashing would read a seekable body twice and cannot be done on a
// stream at all. TLS protects the body on the way to AWS.
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

func (d *s3Driver) put(ctx context.Context, key string, body watched, size int64, contentType string, req requester) error {
	if size >= 0 {
		return req(ctx, request{body: body}, func(ctx context.Context) error {
			return d.putObject(ctx, &s3.PutObjectInput{
				Bucket: &d.bucket, Key: &key, Body: body, ContentLength: &size, ContentType: &contentType,
			})
		})
	}
	bp := partPool.Get().(*[]byte)
	defer partPool.Put(bp)
	buf := *bp
	n, err := io.ReadFull(body, buf)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// Smaller than one part: one request.
		size := int64(n)
		part := watchBody(bytes.NewReader(buf[:n]))
		return req(ctx, request{body: part}, func(ctx context.Context) error {
			return d.putObject(ctx, &s3.PutObjectInput{
				Bucket: &d.bucket, Key: &key, Body: part, ContentLength: &size, ContentType: &contentType,
			})
		})
	}
	if err != nil {
		return fmt.Errorf("read the body: %w", err)
	}
	return d.multipart(ctx, key, body, buf, contentType, req)
}

// multipart uploads a body of unknown size part by part through buf, which
// holds the first part already. Each request (the upload's creation, each
// part, its completion) is a call of the disk's policy of its own: a part
// is retried from buf, the body is read once. A failed upload is aborted,
// so S3 keeps no orphan parts.
func (d *s3Driver) multipart(ctx context.Context, key string, body io.Reader, buf []byte, contentType string, req requester) (err error) {
	var id *string
	err = req(ctx, request{}, func(ctx context.Context) error {
		created, err := d.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket: &d.bucket, Key: &key, ContentType: &contentType,
		})
		if err == nil {
			id = created.UploadId
		}
		return err
	})
	if err != nil {
		return err
	}
	defer func() {
		if err == nil {
			return
		}
		// Bounded, and done even when the caller's context is the reason.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.gap)
		defer cancel()
		_, _ = d.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &d.bucket, Key: &key, UploadId: id})
	}()
	var parts []types.CompletedPart
	n := len(buf)
	for number := int32(1); ; number++ {
		etag, err := d.uploadPart(ctx, key, id, number, buf[:n], req)
		if err != nil {
			return err
		}
		parts = append(parts, types.CompletedPart{ETag: etag, PartNumber: aws.Int32(number)})
		var rerr error
		n, rerr = io.ReadFull(body, buf)
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil && !errors.Is(rerr, io.ErrUnexpectedEOF) {
			return fmt.Errorf("read the body: %w", rerr)
		}
	}
	return req(ctx, request{}, func(ctx context.Context) error {
		_, err := d.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: &d.bucket, Key: &key, UploadId: id,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		return err
	})
}

// uploadPart sends one part as a call of the disk's policy and returns its
// ETag.
func (d *s3Driver) uploadPart(ctx context.Context, key string, id *string, number int32, part []byte, req requester) (*string, error) {
	size := int64(len(part))
	body := watchBody(bytes.NewReader(part))
	var etag *string
	err := req(ctx, request{body: body}, func(ctx context.Context) error {
		out, err := d.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &d.bucket, Key: &key, UploadId: id, PartNumber: aws.Int32(number),
			Body: body, ContentLength: &size,
		}, unsignedPayload)
		if err == nil {
			etag = out.ETag
		}
		return err
	})
	return etag, err
}

func (d *s3Driver) get(ctx context.Context, key string) (*Object, error) {
	out, err := d.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &d.bucket, Key: &key})
	if err != nil {
		return nil, notFound(err)
	}
	return &Object{Info: Info{
		Key: key, Size: aws.ToInt64(out.ContentLength), ContentType: aws.ToString(out.ContentType),
		LastModified: aws.ToTime(out.LastModified), ETag: aws.ToString(out.ETag),
	}, Body: out.Body}, nil
}

func (d *s3Driver) stat(ctx context.Context, key string) (Info, error) {
	out, err := d.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &d.bucket, Key: &key})
	if err != nil {
		return Info{}, notFound(err)
	}
	return Info{
		Key: key, Size: aws.ToInt64(out.ContentLength), ContentType: aws.ToString(out.ContentType),
		LastModified: aws.ToTime(out.LastModified), ETag: aws.ToString(out.ETag),
	}, nil
}

func (d *s3Driver) delete(ctx context.Context, key string) error {
	_, err := d.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &d.bucket, Key: &key})
	if err != nil && errors.Is(notFound(err), fs.ErrNotExist) {
		return nil
	}
	return err
}

func (d *s3Driver) listPage(ctx context.Context, prefix, token string) ([]Info, string, error) {
	in := &s3.ListObjectsV2Input{Bucket: &d.bucket, Prefix: &prefix, MaxKeys: &d.pageSize}
	if token != "" {
		in.ContinuationToken = &token
	}
	out, err := d.client.ListObjectsV2(ctx, in)
	if err != nil {
		return nil, "", err
	}
	page := make([]Info, 0, len(out.Contents))
	for _, o := range out.Contents {
		page = append(page, Info{
			Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size),
			LastModified: aws.ToTime(o.LastModified), ETag: aws.ToString(o.ETag),
		})
	}
	if aws.ToBool(out.IsTruncated) && out.NextContinuationToken != nil {
		return page, *out.NextContinuationToken, nil
	}
	return page, "", nil
}

func (d *s3Driver) temporaryURL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if ttl > maxPresign {
		return "", fmt.Errorf("an s3 presigned URL lives at most 7 days, asked for %s", ttl)
	}
	req, err := d.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &d.bucket, Key: &key}, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", err
	}
	return req.URL, nil
}

func (d *s3Driver) check(ctx context.Context) error {
	// One attempt (the client's retryer is off): /ready reports what S3
	// says now, within readiness_timeout.
	_, err := d.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &d.bucket})
	return err
}

// notFound makes a missing key's error match fs.ErrNotExist.
func notFound(err error) error {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	var api smithy.APIError
	if errors.As(err, &nsk) || errors.As(err, &nf) ||
		(errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound")) {
		return fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return err
}

// httpStatus returns the status of the response S3 answered with, if any.
func httpStatus(err error) (int, bool) {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() > 0 {
		return re.HTTPStatusCode(), true
	}
	return 0, false
}

// putObject sends one PutObject whose connection, for as long as the upload is
// in flight, closes with a TCP reset instead of a clean close. When the body
// fails or the caller gives up mid-upload, the HTTP transport closes the
// connection; after a clean close some S3-compatible servers take the bytes
// received so far as the whole object, although fewer than Content-Length
// arrived (versitygw v1.8.0 does: a 4 MiB put whose body failed after 1 MiB left
// a 1 MiB object). AWS S3 refuses such a request (IncompleteBody); a reset makes
// every server see a failed upload.
func (d *s3Driver) putObject(ctx context.Context, in *s3.PutObjectInput) error {
	var mu sync.Mutex
	var guarded []*gapConn
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if gc := asGapConn(info.Conn); gc != nil {
			gc.guard()
			mu.Lock()
			guarded = append(guarded, gc)
			mu.Unlock()
		}
	}})
	_, err := d.client.PutObject(ctx, in, unsignedPayload)
	mu.Lock()
	defer mu.Unlock()
	for _, gc := range guarded {
		gc.unguard()
	}
	return err
}

func asGapConn(c net.Conn) *gapConn {
	for {
		switch x := c.(type) {
		case *tls.Conn:
			c = x.NetConn()
		case *gapConn:
			return x
		default:
			return nil
		}
	}
}
