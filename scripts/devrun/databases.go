package devrun

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/lib/pq" // the postgres driver of the ping

	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// EnsureDatabases creates each named database on the Postgres server at
// databaseURL unless it exists, and returns the names it created (see
// postgres.EnsureDatabases); a server that does not answer is named, with
// the variable that points at it.
func EnsureDatabases(ctx context.Context, databaseURL string, names []string) ([]string, error) {
	db, err := sql.Open("postgres", databaseURL)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", postgres.Redact(databaseURL), err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect to Postgres at %s (set DATABASE_URL): %w", postgres.Redact(databaseURL), err)
	}
	return postgres.EnsureDatabases(ctx, databaseURL, names, postgres.Timeouts{})
}
