package storage

import (
	"context"
	"errors"
	"net/http"

	"github.com/aws/smithy-go/middleware"

	"github.com/jfastframework/jfast/framework"
)

// s3TraceOptions returns the S3 client's API options that report every
// operation to the App's framework.DependencyObserver (the telemetry plugin,
// when enabled), or none. The middleware sits at the start of the SDK's stack,
// so one operation is one span (a 404 is an answer, not a failed span) ("storage GetObject") that covers the SDK's
// own retries; the bucket and the key are not reported.
func s3TraceOptions(app *framework.App) []func(*middleware.Stack) error {
	observe := framework.DependencyObserverOf(app)
	if observe == nil {
		return nil
	}
	return []func(*middleware.Stack) error{func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("jfastTelemetry",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				ctx, end := observe(ctx, pluginName, middleware.GetOperationName(ctx))
				out, md, err := next.HandleInitialize(ctx, in)
				end(traceErr(err))
				return out, md, err
			}), middleware.Before)
	}}
}

// traceErr is the error a span records: a missing object is an answer.
func traceErr(err error) error {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
		return nil
	}
	return err
}
