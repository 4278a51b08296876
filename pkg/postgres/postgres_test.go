package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

var itemsSet = postgres.MigrationSet{Name: "items", FS: fstest.MapFS{
	"00001_items.sql": {Data: []byte("-- +goose Up\nCREATE TABLE items (id INT PRIMARY KEY);\n")},
}}

func TestInTx(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, itemsSet)
	ctx := context.Background()
	count := func() int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM items`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	boom := errors.New("boom")
	tests := []struct {
		name    string
		fn      func(tx *sqlx.Tx) error
		wantErr error
		rows    int
	}{
		{"commit", func(tx *sqlx.Tx) error { _, err := tx.Exec(`INSERT INTO items VALUES (1)`); return err }, nil, 1},
		{"error rolls back", func(tx *sqlx.Tx) error {
			if _, err := tx.Exec(`INSERT INTO items VALUES (2)`); err != nil {
				return err
			}
			return boom
		}, boom, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := postgres.InTx(ctx, db, tt.fn); !errors.Is(err, tt.wantErr) {
				t.Fatalf("InTx = %v, want %v", err, tt.wantErr)
			}
			if got := count(); got != tt.rows {
				t.Fatalf("%d rows, want %d", got, tt.rows)
			}
		})
	}
	t.Run("panic rolls back and repanics", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Fatal("panic swallowed")
			}
			if got := count(); got != 1 {
				t.Fatalf("%d rows after a panic, want 1", got)
			}
		}()
		_ = postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
			_, _ = tx.Exec(`INSERT INTO items VALUES (3)`)
			panic("boom")
		})
	})
}

func TestMigrateIsIdempotent(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, itemsSet)
	if err := postgres.Migrate(context.Background(), db, itemsSet); err != nil {
		t.Fatalf("second migration run: %v", err)
	}
}

func TestWithDatabase(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"postgres://u@h:5432/postgres?sslmode=disable", "postgres://u@h:5432/orders?sslmode=disable", true},
		{"postgresql://h/x", "postgresql://h/orders", true},
		{"mysql://h/x", "", false},
	}
	for _, tt := range tests {
		got, err := postgres.WithDatabase(tt.in, "orders")
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("WithDatabase(%q) = %q, %v", tt.in, got, err)
		}
	}
}

func TestWithPassword(t *testing.T) {
	tests := []struct {
		name, in, password, want string
		wantErr                  string // a part of the error; "" for none
	}{
		{"no password: as it is", "postgres://u@h:5432/postgres?sslmode=disable", "", "postgres://u@h:5432/postgres?sslmode=disable", ""},
		{"added", "postgres://u@h:5432/postgres?sslmode=disable", "pw", "postgres://u:pw@h:5432/postgres?sslmode=disable", ""},
		{"escaped", "postgres://u@h/postgres", "p@ss/w:rd", "postgres://u:p%40ss%2Fw%3Ard@h/postgres", ""},
		{"the url has a password too", "postgres://u:other@h/postgres", "pw", "", "holds a password"},
		{"the url names no user", "postgres://h/postgres", "pw", "", "names no user"},
		{"not a postgres url", "mysql://u@h/x", "pw", "", "postgres://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := postgres.WithPassword(tt.in, tt.password)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("WithPassword error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("WithPassword error %v, want one saying %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), "other"):
				t.Fatalf("WithPassword error %v quotes a password", err)
			}
			if got != tt.want {
				t.Fatalf("WithPassword = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIsRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"serialization failure", &pq.Error{Code: "40001"}, true},
		{"deadlock", &pq.Error{Code: "40P01"}, true},
		{"connection failure", &pq.Error{Code: "08006"}, true},
		{"admin shutdown", &pq.Error{Code: "57P01"}, true},
		{"unique violation", &pq.Error{Code: "23505"}, false},
		{"check violation", &pq.Error{Code: "23514"}, false},
		{"deadline", context.DeadlineExceeded, true},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		if got := postgres.IsRetryable(tt.err); got != tt.want {
			t.Errorf("%s: IsRetryable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestInSnapshot commits a row between two reads of one snapshot: the
// second read still sees the first one's world, and the snapshot refuses
// to write.
func TestInSnapshot(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, itemsSet)
	ctx := context.Background()
	if _, err := db.Exec(`INSERT INTO items (id) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var first, second int
	err := postgres.InSnapshot(ctx, db, func(tx *sqlx.Tx) error {
		if err := tx.Get(&first, `SELECT count(*) FROM items`); err != nil {
			return err
		}
		if _, err := db.Exec(`INSERT INTO items (id) VALUES (2)`); err != nil {
			return err
		}
		if err := tx.Get(&second, `SELECT count(*) FROM items`); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO items (id) VALUES (3)`)
		return err
	})
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != "25006" { // read_only_sql_transaction
		t.Fatalf("a write in the snapshot: %v, want read_only_sql_transaction", err)
	}
	if first != 1 || second != 1 {
		t.Fatalf("snapshot read %d then %d rows, want 1 both times", first, second)
	}
}
