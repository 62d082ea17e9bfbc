package db

import (
	"container/list"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/problem"
)

// tenantName is what a tenant's name may be: it is put into a connection
// string, so nothing that could change its meaning (/, @, ?, =, spaces).
var tenantName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,63}$`)

// Tenants returns the per-tenant pools of app's db plugin. Call it in
// Routes, at boot: it fails when tenant_url_template is not set.
func Tenants(app *framework.App) (*TenantPools, error) {
	return framework.GetVia(app, dependencyName, (*Plugin).Tenants)
}

// Tenants returns the per-tenant pools, or an error when
// tenant_url_template is not set.
func (p *Plugin) Tenants() (*TenantPools, error) {
	if p.tenants == nil {
		return nil, errors.New(`db: tenant pools are not configured; set [plugin.db] tenant_url_template = "postgres://user@host/db_{tenant}"`)
	}
	return &TenantPools{t: p.tenants}, nil
}

// TenantPools opens one pool per tenant from tenant_url_template, each with
// tenant_pool_size connections, its own bounded ping and its own breaker.
// At most max_tenant_pools stay open: asking for another closes the least
// recently used one (its connections in use finish their work first).
type TenantPools struct{ t *tenantPools }

// Get returns the tenant's pool, opening it (lazily: no connection yet) if
// needed. The name must be 1 to 63 letters, digits, '_' or '-'.
//
// Ask for it per request. A DB whose pool other tenants evicted while a
// request was using it keeps working: its next statement follows the tenant
// to its pool of the moment, opening it again (see [DB.Acquire]). Kept for
// longer, it keeps reopening the tenant's pool and evicting others, as
// asking Get would.
func (tp *TenantPools) Get(tenant string) (*DB, error) { return tp.t.get(tenant) }

// Len returns how many tenant pools are open.
func (tp *TenantPools) Len() int { return tp.t.len() }

type tenantEntry struct {
	name string
	db   *DB
}

type tenantPools struct {
	p       *Plugin
	mu      sync.Mutex
	lru     *list.List // of *tenantEntry, most recent first
	byName  map[string]*list.Element
	closing sync.WaitGroup
	closed  bool
}

func newTenantPools(p *Plugin) *tenantPools {
	return &tenantPools{p: p, lru: list.New(), byName: map[string]*list.Element{}}
}

func (t *tenantPools) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}

func (t *tenantPools) get(tenant string) (*DB, error) {
	if !tenantName.MatchString(tenant) {
		return nil, fmt.Errorf("db: tenant name %q is not 1 to 63 letters, digits, '_' or '-'", tenant)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		// A request still running during shutdown: a 503, as a *DB
		// taken before the stop answers.
		return nil, &problem.DependencyError{Dependency: dependencyName, Err: errors.New("db: the plugin has stopped: its tenant pools are closed")}
	}
	if e, ok := t.byName[tenant]; ok {
		t.lru.MoveToFront(e)
		return e.Value.(*tenantEntry).db, nil
	}
	dsn := strings.ReplaceAll(t.p.cfg.TenantURLTemplate, tenantPlaceholder, tenant)
	d, err := t.p.open(dsn, t.p.cfg.TenantPoolSize, -1, tenant, nil)
	if err != nil {
		return nil, fmt.Errorf("db: tenant %s: %w", tenant, err)
	}
	d.tenants, d.tenant = t, tenant
	t.byName[tenant] = t.lru.PushFront(&tenantEntry{name: tenant, db: d})
	for t.lru.Len() > t.p.cfg.MaxTenantPools {
		oldest := t.lru.Back()
		e := t.lru.Remove(oldest).(*tenantEntry)
		delete(t.byName, e.name)
		t.closeLocked(e)
	}
	return d, nil
}

// peek returns the tenant's open pool, or nil; it opens nothing and does not
// count as a use.
func (t *tenantPools) peek(tenant string) *DB {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byName[tenant]; ok {
		return e.Value.(*tenantEntry).db
	}
	return nil
}

// closeLocked closes an evicted pool in the background: pgxpool's Close
// waits for the connections in use, and get must not wait for them. The DB
// is marked evicted first, so its next call follows the tenant instead of
// meeting the closed pool.
func (t *tenantPools) closeLocked(e *tenantEntry) {
	e.db.evicted.Store(true)
	t.closing.Add(1)
	go func() {
		defer t.closing.Done()
		e.db.close()
	}()
}

func (t *tenantPools) closeAll() {
	t.mu.Lock()
	t.closed = true
	for e := t.lru.Front(); e != nil; e = e.Next() {
		t.closeLocked(e.Value.(*tenantEntry))
	}
	t.lru.Init()
	clear(t.byName)
	t.mu.Unlock()
	t.closing.Wait()
}
