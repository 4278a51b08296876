package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// TestConnectionsPrepareStatementsWithArguments: a statement with
// arguments is prepared on the connection at its first run and reused
// after (one prepared statement however often it runs); one without runs
// unprepared; a statement Postgres refuses leaves the connection usable
// and nothing prepared for it; and the answers are those of the statements.
func TestConnectionsPrepareStatementsWithArguments(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t)
	// One new session, so its prepared statements are the ones asked for:
	// the sessions that migrated the database prepared the migration
	// lock's statements.
	db.SetMaxIdleConns(0)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	ctx := context.Background()
	for i := range 3 {
		var got int
		if err := db.GetContext(ctx, &got, `SELECT $1::int + 1`, i); err != nil {
			t.Fatal(err)
		}
		if got != i+1 {
			t.Fatalf("SELECT %d + 1 = %d", i, got)
		}
		if _, err := db.ExecContext(ctx, `SELECT set_config('application_name', $1, false)`, "prepared"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `SELECT nonsense FROM $1`, 1); err == nil {
		t.Fatal("a statement Postgres cannot parse ran")
	}
	var prepared []string
	if err := db.SelectContext(ctx, &prepared, `SELECT statement FROM pg_prepared_statements ORDER BY statement`); err != nil {
		t.Fatal(err)
	}
	want := []string{`SELECT $1::int + 1`, `SELECT set_config('application_name', $1, false)`}
	if !slices.Equal(prepared, want) {
		t.Fatalf("prepared statements %q, want %q", prepared, want)
	}
}

// TestPreparedStatementsAreBounded: a caller that sends ever new
// statement texts does not grow its connection's prepared statements
// past the bound, and every statement still answers.
func TestPreparedStatementsAreBounded(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t)
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	const texts = 300 // more than a connection keeps
	for k := range texts {
		var got int
		if err := db.GetContext(ctx, &got, fmt.Sprintf(`SELECT $1::int + %d`, k), 1); err != nil {
			t.Fatal(err)
		}
		if got != k+1 {
			t.Fatalf("statement %d answered %d", k, got)
		}
	}
	var n int
	if err := db.GetContext(ctx, &n, `SELECT count(*) FROM pg_prepared_statements`); err != nil {
		t.Fatal(err)
	}
	if n < 1 || n > 256 {
		t.Fatalf("%d prepared statements on the connection after %d texts, want 1 to 256", n, texts)
	}
}
