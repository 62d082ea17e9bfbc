// Package ctxkey holds the key the context package looks up to find the
// cancel context a context derives from, for jfast's own context types (the
// framework's request context, the queue's enqueue context), which answer it
// themselves so that context.Cause and derived contexts behave as with the
// standard library's.
package ctxkey

import "context"

// Cancel is the context package's key for the nearest cancel context: the
// address of an unexported variable of that package, read once by calling
// context.Cause on a probe (Cause asks for it when the context has ended). It
// is nil if a later context package stops asking, and then no key equals it.
var Cancel = func() (key any) {
	context.Cause(probe{Context: context.Background(), seen: &key})
	return key
}()

type probe struct {
	context.Context
	seen *any
}

func (probe) Err() error { return context.Canceled }

func (p probe) Value(key any) any {
	if *p.seen == nil {
		*p.seen = key
	}
	return nil
}
