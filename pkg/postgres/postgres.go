// Package postgres opens a service's own database, runs its embedded
// migrations with goose and runs work in transactions given as closures.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

// DefaultServerURL is the Postgres server of `make run` and the tests.
const DefaultServerURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// WithDatabase returns serverURL pointing at database name.
func WithDatabase(serverURL, name string) (string, error) {
	u, err := parseURL(serverURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// WithPassword returns serverURL with password as its user's password, so
// the password can come from a file (DATABASE_PASSWORD_FILE) and the URL
// stay free of it. An empty password returns serverURL as it is. The URL
// must name its user and hold no password of its own: two passwords would
// leave which one counts to the reader. Errors never quote a password.
func WithPassword(serverURL, password string) (string, error) {
	if password == "" {
		return serverURL, nil
	}
	u, err := parseURL(serverURL)
	if err != nil {
		return "", err
	}
	if _, ok := u.User.Password(); ok {
		return "", errors.New("the database url holds a password and a separate one is given: give one")
	}
	if u.User.Username() == "" {
		return "", fmt.Errorf("the database url %q names no user for the password", Redact(serverURL))
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String(), nil
}

// EnsureDatabase creates database name on the server unless it exists.
func EnsureDatabase(ctx context.Context, serverURL, name string) error {
	return EnsureDatabaseWith(ctx, serverURL, name, Timeouts{})
}

// EnsureDatabaseWith is EnsureDatabase connecting with t.
func EnsureDatabaseWith(ctx context.Context, serverURL, name string, t Timeouts) error {
	_, err := EnsureDatabases(ctx, serverURL, []string{name}, t)
	return err
}

// EnsureDatabases creates each of names on the server unless it exists,
// connecting with t, and returns the ones it created: one that a
// concurrent start created first is neither created here nor an error.
func EnsureDatabases(ctx context.Context, serverURL string, names []string, t Timeouts) ([]string, error) {
	db, err := openDB(serverURL, t)
	if err != nil {
		return nil, fmt.Errorf("open server: %w", err)
	}
	defer db.Close()
	var created []string
	for _, name := range names {
		var exists bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
			return created, fmt.Errorf("look up database %s: %w", name, err)
		}
		if exists {
			continue
		}
		// CREATE DATABASE takes no bind parameters; the name is quoted instead.
		_, err = db.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name))
		switch {
		case err == nil:
			created = append(created, name)
		case !lostCreateRace(err):
			return created, fmt.Errorf("create database %s: %w", name, err)
		}
	}
	return created, nil
}

// lostCreateRace reports whether CREATE DATABASE failed only because a
// concurrent start of the same service created the database first. Postgres
// reports that as duplicate_database (42P04) when the other creation has
// committed, and as a unique violation (23505) on pg_database's name index
// when both insert the catalogue row at the same moment.
func lostCreateRace(err error) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return false
	}
	switch pqErr.Code {
	case "42P04":
		return true
	case "23505":
		return pqErr.Constraint == "pg_database_datname_index"
	}
	return false
}

// DropDatabase drops database name, closing other sessions first. Tests use it.
func DropDatabase(ctx context.Context, serverURL, name string) error {
	db, err := openDB(serverURL, Timeouts{})
	if err != nil {
		return fmt.Errorf("open server: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+pq.QuoteIdentifier(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// DefaultMaxOpen is the pool size of a service that does not set one (the
// order and reconciliation services).
const DefaultMaxOpen = 20

// PoolConfig sizes the connection pool and bounds its connections' waits.
type PoolConfig struct {
	// MaxOpen bounds the open connections; 0 is DefaultMaxOpen.
	MaxOpen int
	MaxIdle int
	// Timeouts' zero fields take DefaultTimeouts'.
	Timeouts Timeouts
}

// Open connects to the database at dsn and checks it answers.
func Open(ctx context.Context, dsn string, pool PoolConfig) (*sqlx.DB, error) {
	sqlDB, err := openDB(dsn, pool.Timeouts)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db := sqlx.NewDb(sqlDB, "postgres")
	if pool.MaxOpen == 0 {
		pool.MaxOpen = DefaultMaxOpen
	}
	if pool.MaxIdle == 0 {
		pool.MaxIdle = pool.MaxOpen
	}
	db.SetMaxOpenConns(pool.MaxOpen)
	db.SetMaxIdleConns(pool.MaxIdle)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return db, nil
}

// OpenService creates the service's database if needed, connects to it and
// applies the migration sets in order.
func OpenService(ctx context.Context, serverURL, name string, pool PoolConfig, sets ...MigrationSet) (*sqlx.DB, error) {
	if err := EnsureDatabaseWith(ctx, serverURL, name, pool.Timeouts); err != nil {
		return nil, err
	}
	dsn, err := WithDatabase(serverURL, name)
	if err != nil {
		return nil, err
	}
	db, err := Open(ctx, dsn, pool)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, db, sets...); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// MigrationSet is one independently versioned set of goose migrations.
// Shared tables (outbox, inbox, version guard, DLQ) each ship their own set,
// so a service composes the ones it needs with its own.
type MigrationSet struct {
	// Name keys the set's version table (goose_<name>).
	Name string
	FS   fs.FS
}

// migrationLockID keys the advisory lock that serializes migrators. Postgres
// scopes advisory locks to the current database and every service owns its
// database, so one fixed id per database is enough: it is goose's own
// default, which also makes a goose CLI run against the same database wait
// for a starting service and the other way round.
const migrationLockID = lock.DefaultLockID

// Migration lock waits: poll every second (goose's minimum) for up to five
// minutes, the longest a replica waits for another replica's migrations
// before it gives up and exits.
const (
	migrationLockPollSeconds = 1
	migrationLockPolls       = 300
)

// Migrate applies every set, each tracked in its own goose version table.
//
// Replicas that start together (kubectl scale, a rolling update with a
// migration) run Migrate at once. It therefore holds one Postgres session
// advisory lock for all the sets: the first replica migrates, the others
// wait, then find every set up to date. One lock over the whole run rather
// than one per set keeps a replica from starting its service on a database
// whose later sets another replica is still migrating.
func Migrate(ctx context.Context, db *sqlx.DB, sets ...MigrationSet) (err error) {
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(migrationLockID),
		lock.WithLockTimeout(migrationLockPollSeconds, migrationLockPolls),
	)
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	// The advisory lock belongs to a session, so it is taken and released on
	// one dedicated connection; goose migrates on others from the pool. A
	// pool of one connection would leave goose none: the pool is one wider
	// while the lock is held.
	if maxOpen := db.Stats().MaxOpenConnections; maxOpen > 0 {
		db.SetMaxOpenConns(maxOpen + 1)
		defer db.SetMaxOpenConns(maxOpen)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer conn.Close()
	if err := locker.SessionLock(ctx, conn); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer func() {
		// Unlock even when ctx is done: the connection goes back to the pool.
		uerr := locker.SessionUnlock(context.WithoutCancel(ctx), conn)
		if uerr == nil {
			return
		}
		// A session still holding the lock must not go back to the pool,
		// where it would block every later migrator: discard it, which ends
		// the session and with it the lock.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		if err == nil {
			err = fmt.Errorf("migration unlock: %w", uerr)
		}
	}()
	return migrateSets(ctx, db, sets)
}

func migrateSets(ctx context.Context, db *sqlx.DB, sets []MigrationSet) error {
	for _, set := range sets {
		store, err := database.NewStore(database.DialectPostgres, "goose_"+set.Name)
		if err != nil {
			return fmt.Errorf("migrations %s: %w", set.Name, err)
		}
		p, err := goose.NewProvider("", db.DB, set.FS, goose.WithStore(store))
		if err != nil {
			return fmt.Errorf("migrations %s: %w", set.Name, err)
		}
		if _, err := p.Up(ctx); err != nil {
			return fmt.Errorf("migrate %s: %w", set.Name, err)
		}
	}
	return nil
}

// InTx runs fn in a transaction: commit when fn returns nil, roll back when
// it returns an error or panics.
func InTx(ctx context.Context, db *sqlx.DB, fn func(tx *sqlx.Tx) error) (err error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// InSnapshot runs fn in a read-only REPEATABLE READ transaction, so every
// statement fn runs reads the same snapshot of the database: a view built
// from several statements (an order, its refunds and its outbox rows, say)
// never pairs rows written at different moments.
func InSnapshot(ctx context.Context, db *sqlx.DB, fn func(tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin snapshot: %w", err)
	}
	// Nothing was written: rolling back ends the snapshot as well as a
	// commit would, and also after fn failed or panicked.
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

// IsRetryable reports whether err is a transient database failure that the
// same work can overcome by trying again: serialization failures, deadlocks,
// lost connections, lack of resources and shutdown.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		class := string(pqErr.Code.Class())
		switch class {
		case "40", "08", "53", "57":
			return true
		}
		return false
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "bad connection") ||
		strings.Contains(msg, "connection reset")
}
