package idempotency

import (
	"context"
	"net/http"
	"time"
)

// state is where a key stands.
type state string

const (
	stateRunning  state = "running"   // a first request holds the key under its lease
	stateDone     state = "done"      // the response is stored and replayed
	stateTooLarge state = "too_large" // done, but the response was over max_response_body
	stateNotKept  state = "not_kept"  // done, but the handler took the connection over (a hijack): no response to replay
)

// record is what a store keeps per key.
type record struct {
	Fingerprint string      `json:"f"`
	State       state       `json:"s"`
	LeaseUntil  time.Time   `json:"l"`
	ExpiresAt   time.Time   `json:"e"`
	Status      int         `json:"c,omitempty"`
	Header      http.Header `json:"h,omitempty"`
	Body        []byte      `json:"b,omitempty"`
}

// claim is a request's attempt to take a key.
type claim struct {
	Key         string
	Fingerprint string
	Token       string // unique per attempt: only its holder may complete or release the key
	Now         time.Time
	LeaseUntil  time.Time
	ExpiresAt   time.Time
}

// takeableBy reports whether c may take over rec: rec expired (the key is
// forgotten), or its first request's lease ran out before it stored a
// response and c is that same request again. A key whose lease ran out still
// belongs to its first request: another request with it is the client reusing
// a key, which gets 422, not a run that would store another request's
// response under it.
func (rec *record) takeableBy(c claim) bool {
	if !c.Now.Before(rec.ExpiresAt) {
		return true
	}
	return rec.State == stateRunning && !c.Now.Before(rec.LeaseUntil) && rec.Fingerprint == c.Fingerprint
}

// store keeps idempotency records. Every method is bounded by ctx; an error
// means the store did not answer and the caller must fail closed.
type store interface {
	// acquire takes c.Key for c.Token when it is free or its record is
	// takeable by c (record.takeableBy), and returns (true, nil); otherwise
	// it returns the record that holds it.
	acquire(ctx context.Context, c claim) (bool, *record, error)
	// complete stores rec under key if token still holds it; it reports
	// whether it did.
	complete(ctx context.Context, key, token string, rec *record) (bool, error)
	// release deletes key if token still holds it.
	release(ctx context.Context, key, token string) error
	// ensure prepares the store (creates the table); it is safe to call again.
	ensure(ctx context.Context) error
	// sweep deletes expired records, where the store does not expire them itself.
	sweep(ctx context.Context, now time.Time) (int64, error)
	// check answers /ready.
	check(ctx context.Context) error
	// name is the store's name in problems and /ready: "postgres" or "redis".
	name() string
}

// acquireAttempts bounds the loop of acquire when the record it read vanished
// or changed before it could act on it.
const acquireAttempts = 4
