package idempotency

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/readiness"
)

// redisStore keeps one string per key: the holder's token (tokenLen hex
// characters) followed by the JSON record. Taking a free key is SET NX; taking
// over a stale one, storing the response and releasing are compare-and-set
// scripts on the whole value or on the token, so a request whose lease was
// taken over can no longer write.
//
// Lease and expiry are decided by the App's clock (written into the record),
// not by Redis's own clock, so replicas and tests agree on them; the Redis TTL
// (PX, ttl) only reclaims the memory of keys nobody asks about again.
type redisStore struct {
	client redis.UniversalClient
	prefix string
	ttl    time.Duration
	// ready is the cache plugin's readiness check, which check reports:
	// one Redis, one verdict. A PING of the store's own would compete with
	// the cache's for the half-open breaker's single probe, and the loser
	// would report a Redis that answers as failing. Nil when the plugin
	// serving the client has no check: the store PINGs.
	ready func(context.Context) readiness.Report
}

const tokenLen = 32

var (
	// takeOver replaces KEYS[1] when it still holds exactly ARGV[1].
	takeOver = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	return 1
end
return 0`)
	// completeScript replaces KEYS[1] when its token is ARGV[1].
	completeScript = whenToken(`	redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	return 1`)
	// releaseScript deletes KEYS[1] when its token is ARGV[1].
	releaseScript = whenToken(`	return redis.call('DEL', KEYS[1])`)
)

// whenToken returns the script that runs body when the value of KEYS[1]
// starts with the token ARGV[1] (the request still holds the key), and
// returns 0 otherwise.
func whenToken(body string) *redis.Script {
	return redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, ` + fmt.Sprint(tokenLen) + `) == ARGV[1] then
` + body + `
end
return 0`)
}

func newRedisStore(client redis.UniversalClient, prefix string, ttl time.Duration, ready func(context.Context) readiness.Report) *redisStore {
	return &redisStore{client: client, prefix: prefix, ttl: ttl, ready: ready}
}

func (s *redisStore) name() string { return StoreRedis }

// rkey is the Redis key of an Idempotency-Key: the key is hex-encoded so that
// no character of it (spaces, braces of a cluster hash tag) means anything to Redis.
func (s *redisStore) rkey(key string) string { return s.prefix + hex.EncodeToString([]byte(key)) }

func encodeRecord(token string, rec *record) (string, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	return token + string(b), nil
}

func decodeRecord(v string) (*record, error) {
	if len(v) < tokenLen {
		return nil, errors.New("stored value too short")
	}
	var rec record
	if err := json.Unmarshal([]byte(v[tokenLen:]), &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// px is the Redis TTL of a record expiring at expiresAt by the App clock at now:
// at least one millisecond, at most the configured ttl.
func (s *redisStore) px(now, expiresAt time.Time) time.Duration {
	d := expiresAt.Sub(now)
	if d > s.ttl {
		d = s.ttl
	}
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}

func (s *redisStore) acquire(ctx context.Context, c claim) (bool, *record, error) {
	k := s.rkey(c.Key)
	val, err := encodeRecord(c.Token, &record{Fingerprint: c.Fingerprint, State: stateRunning, LeaseUntil: c.LeaseUntil, ExpiresAt: c.ExpiresAt})
	if err != nil {
		return false, nil, err
	}
	px := s.px(c.Now, c.ExpiresAt)
	for range acquireAttempts {
		ok, err := s.client.SetNX(ctx, k, val, px).Result()
		if err != nil {
			return false, nil, err
		}
		if ok {
			return true, nil, nil
		}
		old, err := s.client.Get(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			continue // released in between: try again
		}
		if err != nil {
			return false, nil, err
		}
		rec, err := decodeRecord(old)
		if err != nil {
			return false, nil, fmt.Errorf("decode stored record: %w", err)
		}
		if !rec.takeableBy(c) {
			return false, rec, nil
		}
		n, err := takeOver.Run(ctx, s.client, []string{k}, old, val, px.Milliseconds()).Int()
		if err != nil {
			return false, nil, err
		}
		if n == 1 {
			return true, nil, nil
		}
		// Someone else changed it first: look again.
	}
	return false, &record{Fingerprint: c.Fingerprint, State: stateRunning, LeaseUntil: c.LeaseUntil, ExpiresAt: c.ExpiresAt}, nil
}

func (s *redisStore) complete(ctx context.Context, key, token string, rec *record) (bool, error) {
	val, err := encodeRecord(token, rec)
	if err != nil {
		return false, err
	}
	// The record's expiry is ttl from now by the App clock; Redis gets the
	// same duration on its own clock.
	n, err := completeScript.Run(ctx, s.client, []string{s.rkey(key)}, token, val, s.ttl.Milliseconds()).Int()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

func (s *redisStore) release(ctx context.Context, key, token string) error {
	return releaseScript.Run(ctx, s.client, []string{s.rkey(key)}, token).Err()
}

func (s *redisStore) ensure(context.Context) error { return nil }

func (s *redisStore) sweep(context.Context, time.Time) (int64, error) { return 0, nil }

func (s *redisStore) check(ctx context.Context) error {
	if s.ready == nil {
		return s.client.Ping(ctx).Err()
	}
	if r := s.ready(ctx); !r.Healthy {
		return errors.New(r.Detail)
	}
	return nil
}
