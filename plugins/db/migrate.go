package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

// MigrateAction is what [Plugin.Migrate] does; the CLI's
// "jfast migrate up|down|status" maps to it one to one.
type MigrateAction int

const (
	// MigrateUp applies every pending migration, in order.
	MigrateUp MigrateAction = iota
	// MigrateDown reverts the last applied migration (one step).
	MigrateDown
	// MigrateStatus changes nothing and reports the versions.
	MigrateStatus
)

// String returns "up", "down" or "status".
func (a MigrateAction) String() string {
	switch a {
	case MigrateUp:
		return "up"
	case MigrateDown:
		return "down"
	case MigrateStatus:
		return "status"
	}
	return fmt.Sprintf("MigrateAction(%d)", int(a))
}

// ParseMigrateAction reads "up", "down" or "status".
func ParseMigrateAction(s string) (MigrateAction, error) {
	for _, a := range []MigrateAction{MigrateUp, MigrateDown, MigrateStatus} {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("db: unknown migrate action %q: use up, down or status", s)
}

// Migration is one migration known to the service.
type Migration struct {
	// Version is the migration's sequence number (the file's prefix).
	Version int32
	// Name is the file name without the ".sql" suffix.
	Name string
	// Applied says whether the database is at this version or later.
	Applied bool
}

// MigrationReport is what [Plugin.Migrate] did and where the database stands.
type MigrationReport struct {
	// Action is what was asked.
	Action MigrateAction
	// Current is the database's version after the action.
	Current int32
	// Latest is the highest version the service knows.
	Latest int32
	// Applied lists the migrations this call applied (up) or reverted
	// (down) and committed, in the order it did; empty when another
	// replica had already done it. With an error, it lists those that
	// committed before the one that failed.
	Applied []Migration
	// Migrations lists every known migration.
	Migrations []Migration
}

// Pending reports how many known migrations are not applied.
func (r MigrationReport) Pending() int { return int(r.Latest - r.Current) }

// Migrate runs the embedded migrations (see [WithMigrations]) against url
// on a connection of its own, never one of the pool's: migrations may run
// for minutes, and they hold a session-level advisory lock. Only one
// Migrate runs at a time per database and migrations_table, across
// processes: another replica waits for the lock, then finds the work done.
//
// Migrate works on a plugin that has not started (the CLI loads the
// configuration with framework.New and calls it), and is bounded by ctx
// (connecting by connect_timeout as well). Its errors begin
// "db: migrate <action>: ".
func (p *Plugin) Migrate(ctx context.Context, action MigrateAction) (MigrationReport, error) {
	rep, err := p.migrate(ctx, action)
	if err != nil {
		return rep, fmt.Errorf("db: migrate %s: %w", action, err)
	}
	return rep, nil
}

// migrate is Migrate with errors that do not say "db: migrate <action>":
// RunMigrations returns them to the command, which says it.
func (p *Plugin) migrate(ctx context.Context, action MigrateAction) (MigrationReport, error) {
	rep := MigrationReport{Action: action}
	if p.migrations == nil {
		return rep, errors.New("no migrations were compiled in; pass db.WithMigrations(fsys) to db.New")
	}
	if action < MigrateUp || action > MigrateStatus {
		return rep, errors.New("unknown action; use db.MigrateUp, db.MigrateDown or db.MigrateStatus")
	}
	if p.cfg.URL == "" {
		return rep, errors.New("url is not set; set [plugin.db] url or JFAST_DB_URL")
	}
	pc, err := p.poolConfig(p.cfg.URL, 1, 0)
	if err != nil {
		return rep, err
	}
	cc := pc.ConnConfig
	cc.RuntimeParams["application_name"] = p.migrateAppName()
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return rep, p.unavailableMigrate(fmt.Errorf("connect: %w", err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = conn.Close(cctx) // closing the session also releases the advisory lock
		cancel()
	}()

	// One lock per database and version table, held for the whole call so
	// that a replica that waited reads the version the winner left. tern
	// takes its own (re-entrant) lock inside as well.
	lockKey := "jfast.migrate:" + p.cfg.MigrationsTable
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", lockKey); err != nil {
		return rep, p.unavailableMigrate(fmt.Errorf("take the advisory lock: %w", err))
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = conn.Exec(uctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", lockKey)
		cancel()
	}()

	return p.migrateOn(ctx, conn, action)
}

// migrateOn is migrate on conn, which holds the lock.
func (p *Plugin) migrateOn(ctx context.Context, conn *pgx.Conn, action MigrateAction) (MigrationReport, error) {
	rep := MigrationReport{Action: action}
	// tern's NewMigrator creates the version table. Status changes nothing
	// (and may run as a role that cannot create), so its migrator has no
	// connection: it only loads the files, and the version is read here.
	mconn := conn
	if action == MigrateStatus {
		mconn = nil
	}
	m, err := migrate.NewMigrator(ctx, mconn, p.cfg.MigrationsTable)
	if err != nil {
		return rep, fmt.Errorf("version table %s: %w", p.cfg.MigrationsTable, err)
	}
	if err := m.LoadMigrations(p.migrations); err != nil {
		return rep, fmt.Errorf("load migrations: %w", err)
	}
	if len(m.Migrations) == 0 {
		return rep, errors.New("no migration files (NNN_name.sql) at the root of the migrations fs")
	}
	// tern calls OnStart before a migration runs, and starts the next one
	// only once the one before committed: a migration is done when the next
	// starts, or when the whole run returns without an error.
	var running *Migration
	m.OnStart = func(seq int32, name, direction, _ string) {
		if running != nil {
			rep.Applied = append(rep.Applied, *running)
		}
		running = &Migration{Version: seq, Name: strings.TrimSuffix(name, ".sql"), Applied: direction == "up"}
		if p.log != nil {
			p.log.Info("db: migrating", "version", seq, "name", name, "direction", direction)
		}
	}
	cur, err := schemaVersion(ctx, conn, p.cfg.MigrationsTable)
	if err != nil {
		return rep, fmt.Errorf("read the current version: %w", err)
	}
	switch action {
	case MigrateUp:
		err = m.Migrate(ctx)
	case MigrateDown:
		if cur > 0 {
			err = m.MigrateTo(ctx, cur-1)
		}
	}
	if err != nil {
		return rep, err
	}
	if running != nil {
		rep.Applied = append(rep.Applied, *running)
	}
	if rep.Current, err = schemaVersion(ctx, conn, p.cfg.MigrationsTable); err != nil {
		return rep, fmt.Errorf("read the current version: %w", err)
	}
	for _, mg := range m.Migrations {
		rep.Migrations = append(rep.Migrations, Migration{Version: mg.Sequence, Name: strings.TrimSuffix(mg.Name, ".sql"), Applied: mg.Sequence <= rep.Current})
		rep.Latest = max(rep.Latest, mg.Sequence)
	}
	return rep, nil
}

// schemaVersion reads the version that table records: 0 when the table
// does not exist (tern creates it on the first up or down). table resolves
// as in a statement, schema-qualified or by the search_path; validate
// made sure it is an identifier.
func schemaVersion(ctx context.Context, conn *pgx.Conn, table string) (int32, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v int32
	err := conn.QueryRow(ctx, "SELECT version FROM "+table).Scan(&v)
	return v, err
}

func (p *Plugin) migrateAppName() string {
	name := p.cfg.ApplicationName
	if name == "" {
		name = p.appName
	}
	if name == "" {
		name = "jfast"
	}
	return name + " migrate"
}

func (p *Plugin) unavailableMigrate(err error) error {
	return scrub(err)
}

// RunMigrations implements framework.Migrator, behind the service's
// "migrate up|down|status" command: it runs [Plugin.Migrate] and writes one
// line per migration it applied or reverted, then one per known migration
// with its state, then the version. Its errors leave out the
// "db: migrate <direction>: " that the command puts in front of them.
func (p *Plugin) RunMigrations(ctx context.Context, direction string, out io.Writer) error {
	action, err := ParseMigrateAction(direction)
	if err != nil {
		return err
	}
	r, err := p.migrate(ctx, action)
	for _, m := range r.Applied {
		verb := "applied"
		if action == MigrateDown {
			verb = "reverted"
		}
		fmt.Fprintf(out, "%s %03d %s\n", verb, m.Version, m.Name)
	}
	if err != nil {
		return err
	}
	if action != MigrateStatus && len(r.Applied) == 0 {
		fmt.Fprintln(out, "nothing to do")
	}
	for _, m := range r.Migrations {
		state := "pending"
		if m.Applied {
			state = "applied"
		}
		fmt.Fprintf(out, "  %-8s %03d %s\n", state, m.Version, m.Name)
	}
	fmt.Fprintf(out, "version %d of %d (%s)\n", r.Current, r.Latest, p.cfg.MigrationsTable)
	return nil
}
