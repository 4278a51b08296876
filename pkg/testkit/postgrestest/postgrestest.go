// Package postgrestest gives integration tests a fresh database of their
// own on the server at DATABASE_URL, dropped when the test ends.
package postgrestest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// ServerURL returns DATABASE_URL, or postgres.DefaultServerURL when it is
// unset or empty, and fails the test when no Postgres answers there: a
// database test that skipped would let a run without a database pass.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	url := strings.TrimSpace(os.Getenv("DATABASE_URL"))
	if url == "" {
		url = postgres.DefaultServerURL
	}
	db, err := sqlx.Open("postgres", url)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
	}
	if err != nil {
		tb.Fatalf("this integration test needs the Postgres server at DATABASE_URL (default %s): %v",
			postgres.DefaultServerURL, err)
	}
	return url
}

// UniqueName returns a database or topic name no other test run uses.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(prefix) + "_" + hex.EncodeToString(b[:])
}

// NewDatabase creates a database with a unique name, migrates it with sets
// and drops it when the test ends. It returns the handle and the name.
func NewDatabase(tb testing.TB, sets ...postgres.MigrationSet) (*sqlx.DB, string) {
	tb.Helper()
	server := ServerURL(tb)
	name := UniqueName("t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := postgres.OpenService(ctx, server, name, postgres.PoolConfig{MaxOpen: 10}, sets...)
	if err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := postgres.DropDatabase(ctx, server, name); err != nil {
			tb.Errorf("drop test database: %v", err)
		}
	})
	return db, name
}
