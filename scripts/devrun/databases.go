package devrun

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// EnsureDatabases creates each named database on the Postgres server at
// databaseURL unless it exists, and returns the names it created.
func EnsureDatabases(ctx context.Context, databaseURL string, names []string) ([]string, error) {
	db, err := sql.Open("postgres", databaseURL)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", postgres.Redact(databaseURL), err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect to Postgres at %s (set DATABASE_URL): %w", postgres.Redact(databaseURL), err)
	}
	var created []string
	for _, name := range names {
		var exists bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
			return created, fmt.Errorf("look up database %s: %w", name, err)
		}
		if exists {
			continue
		}
		_, err := db.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name))
		switch {
		case pq.As(err, pqerror.DuplicateDatabase) != nil: // created meanwhile
		case err != nil:
			return created, fmt.Errorf("create database %s: %w", name, err)
		default:
			created = append(created, name)
		}
	}
	return created, nil
}
