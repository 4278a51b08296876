package devrun_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// databaseURL is the Postgres of DATABASE_URL, or of the default when it is
// unset or empty. A server that does not answer fails the test: a skipped
// database test would let a run without a database pass.
func databaseURL(t *testing.T) string {
	t.Helper()
	url := strings.TrimSpace(os.Getenv("DATABASE_URL"))
	if url == "" {
		url = suite.DefaultDatabaseURL
	}
	db, err := sql.Open("postgres", url)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
	}
	if err != nil {
		t.Fatalf("no Postgres answers at DATABASE_URL (default %s): %v", suite.DefaultDatabaseURL, err)
	}
	return url
}

// uniqueName is a database name no other run uses.
func uniqueName(suffix string) string {
	return fmt.Sprintf("devrun_%d_%d_%s", os.Getpid(), time.Now().UnixNano(), suffix)
}

// dropAfter drops the databases when the test ends.
func dropAfter(t *testing.T, url string, names ...string) {
	t.Cleanup(func() {
		db, err := sql.Open("postgres", url)
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		for _, name := range names {
			if _, err := db.Exec(`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		}
	})
}

// databaseExists reports whether the server has the database.
func databaseExists(t *testing.T, url, name string) bool {
	t.Helper()
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var exists bool
	if err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	return exists
}

// writeFiles lays out files (path → content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for path, content := range files {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(strings.TrimLeft(content, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// buffer is an io.Writer the test reads while others write to it.
type buffer = servicetest.LogBuffer
