package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jfastframework/jfast/readiness"
)

// postgresStore keeps one row per key. Taking a key is one INSERT ... ON
// CONFLICT DO UPDATE ... WHERE the row is takeable (record.takeableBy):
// PostgreSQL serializes concurrent inserts of one key on the primary key, so
// exactly one of them gets the row back.
type postgresStore struct {
	// conn takes a connection through the db plugin's breaker and bounded
	// ping: while PostgreSQL is known to be down, a request gets the 503 at
	// once instead of waiting out store_timeout.
	conn  func(context.Context) (*pgxpool.Conn, error)
	table string // validated identifier or schema.identifier
	// ready is the db plugin's readiness check, which check reports first:
	// one PostgreSQL, one verdict. The store's own queries through the
	// breaker would compete with the db's check for the half-open breaker's
	// single probe, and the loser would report a server that answers as
	// failing. Nil when the plugin serving the pool has no check.
	ready func(context.Context) readiness.Report

	// sem lets one ensure run at a time without making a request wait past
	// its own context; ensured skips it once the table is known to exist.
	sem     chan struct{}
	ensured atomic.Bool

	qAcquire, qSelect, qComplete, qRelease, qSweep, qCheck string
}

func newPostgresStore(conn func(context.Context) (*pgxpool.Conn, error), table string, ready func(context.Context) readiness.Report) *postgresStore {
	s := &postgresStore{conn: conn, table: table, ready: ready, sem: make(chan struct{}, 1)}
	t := table
	s.qAcquire = `INSERT INTO ` + t + ` AS t (key, fingerprint, state, token, lease_until, expires_at, created_at)
VALUES ($1, $2, 'running', $3, $4, $5, $6)
ON CONFLICT (key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, state = 'running', token = EXCLUDED.token,
	lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at, created_at = EXCLUDED.created_at,
	status = NULL, header = NULL, body = NULL
WHERE t.expires_at <= $6 OR (t.state = 'running' AND t.lease_until <= $6 AND t.fingerprint = EXCLUDED.fingerprint)
RETURNING token`
	s.qSelect = `SELECT fingerprint, state, lease_until, expires_at, coalesce(status, 0), header, body FROM ` + t + ` WHERE key = $1`
	s.qComplete = `UPDATE ` + t + ` SET state = $3, lease_until = $4, expires_at = $5, status = $6, header = $7, body = $8 WHERE key = $1 AND token = $2`
	s.qRelease = `DELETE FROM ` + t + ` WHERE key = $1 AND token = $2`
	s.qSweep = `DELETE FROM ` + t + ` WHERE key IN (SELECT key FROM ` + t + ` WHERE expires_at <= $1 LIMIT 1000)`
	s.qCheck = `SELECT 1 FROM ` + t + ` LIMIT 0`
	return s
}

func (s *postgresStore) name() string { return StorePostgres }

// with runs fn on a connection taken through the db plugin's breaker.
func (s *postgresStore) with(ctx context.Context, fn func(c *pgxpool.Conn) error) error {
	c, err := s.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return fn(c)
}

// ensure creates the table and its index when missing. Replicas starting
// together take a transaction-level advisory lock first: two concurrent
// CREATE TABLE IF NOT EXISTS of one name can fail on PostgreSQL's catalog
// unique index.
func (s *postgresStore) ensure(ctx context.Context) error {
	if s.ensured.Load() {
		return nil
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.ensured.Load() {
		return nil
	}
	idx := s.table[strings.LastIndexByte(s.table, '.')+1:] + "_expires_at_idx"
	err := s.with(ctx, func(c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "jfast.idempotency:"+s.table); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
	key         text        PRIMARY KEY,
	fingerprint text        NOT NULL,
	state       text        NOT NULL,
	token       text        NOT NULL,
	lease_until timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL,
	created_at  timestamptz NOT NULL,
	status      integer,
	header      bytea,
	body        bytea
)`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `CREATE INDEX IF NOT EXISTS `+idx+` ON `+s.table+` (expires_at)`)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("create table %s: %w", s.table, err)
	}
	s.ensured.Store(true)
	return nil
}

func (s *postgresStore) acquire(ctx context.Context, c claim) (bool, *record, error) {
	if err := s.ensure(ctx); err != nil {
		return false, nil, err
	}
	// A repeat is answered by a read: no row lock, no commit to flush. Only a
	// key that looks free or stale goes to the insert, which decides.
	rec, err := s.read(ctx, c.Key)
	if err != nil {
		return false, nil, err
	}
	if rec != nil && !rec.takeableBy(c) {
		return false, rec, nil
	}
	for range acquireAttempts {
		var token string
		err := s.with(ctx, func(conn *pgxpool.Conn) error {
			return conn.QueryRow(ctx, s.qAcquire, c.Key, c.Fingerprint, c.Token, c.LeaseUntil, c.ExpiresAt, c.Now).Scan(&token)
		})
		if err == nil {
			return true, nil, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return false, nil, err
		}
		// Another request holds the key: read what it holds.
		rec, err := s.read(ctx, c.Key)
		if err != nil {
			return false, nil, err
		}
		if rec == nil || rec.takeableBy(c) {
			continue // released or gone stale between the two statements: try again
		}
		return false, rec, nil
	}
	return false, &record{Fingerprint: c.Fingerprint, State: stateRunning, LeaseUntil: c.LeaseUntil, ExpiresAt: c.ExpiresAt}, nil
}

// read returns key's record, or nil when there is none.
func (s *postgresStore) read(ctx context.Context, key string) (*record, error) {
	var (
		rec    record
		st     string
		header []byte
	)
	err := s.with(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, s.qSelect, key).Scan(&rec.Fingerprint, &st, &rec.LeaseUntil, &rec.ExpiresAt, &rec.Status, &header, &rec.Body)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec.State = state(st)
	if len(header) > 0 {
		if err := json.Unmarshal(header, &rec.Header); err != nil {
			return nil, fmt.Errorf("decode stored headers: %w", err)
		}
	}
	return &rec, nil
}

func (s *postgresStore) complete(ctx context.Context, key, token string, rec *record) (bool, error) {
	var header []byte
	if len(rec.Header) > 0 {
		var err error
		if header, err = json.Marshal(rec.Header); err != nil {
			return false, err
		}
	}
	var tag pgconn.CommandTag
	err := s.with(ctx, func(c *pgxpool.Conn) (err error) {
		tag, err = c.Exec(ctx, s.qComplete, key, token, string(rec.State), rec.LeaseUntil, rec.ExpiresAt, rec.Status, header, rec.Body)
		return err
	})
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func (s *postgresStore) release(ctx context.Context, key, token string) error {
	return s.with(ctx, func(c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, s.qRelease, key, token)
		return err
	})
}

func (s *postgresStore) sweep(ctx context.Context, now time.Time) (int64, error) {
	if err := s.ensure(ctx); err != nil {
		return 0, err
	}
	var tag pgconn.CommandTag
	err := s.with(ctx, func(c *pgxpool.Conn) (err error) {
		tag, err = c.Exec(ctx, s.qSweep, now)
		return err
	})
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// check reports the db plugin's check, then whether the table exists
// (creating it if needed). The table's query goes through the db breaker
// (Plugin.Check says what a refusal beside the half-open probe means).
func (s *postgresStore) check(ctx context.Context) error {
	if s.ready != nil {
		if r := s.ready(ctx); !r.Healthy {
			return errors.New(r.Detail)
		}
	}
	err := s.ensure(ctx)
	if err == nil {
		err = s.with(ctx, func(c *pgxpool.Conn) error {
			_, err := c.Exec(ctx, s.qCheck)
			return err
		})
	}
	return err
}

// checkedFirst reports whether check asks the db plugin's own check first.
func (s *postgresStore) checkedFirst() bool { return s.ready != nil }
