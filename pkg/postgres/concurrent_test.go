package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// stepsSet is a service's own migration set whose every step leaves a row
// behind, so a step applied twice shows as a second row.
var stepsSet = postgres.MigrationSet{Name: "steps", FS: fstest.MapFS{
	"00001_steps.sql": {Data: []byte("-- +goose Up\nCREATE TABLE steps (step INT NOT NULL);\nINSERT INTO steps VALUES (1);\n")},
	"00002_step.sql":  {Data: []byte("-- +goose Up\nINSERT INTO steps VALUES (2);\n")},
	"00003_step.sql":  {Data: []byte("-- +goose Up\nALTER TABLE steps ADD COLUMN note TEXT;\nINSERT INTO steps VALUES (3);\n")},
	"00004_step.sql":  {Data: []byte("-- +goose Up\nCREATE INDEX steps_step ON steps (step);\nINSERT INTO steps VALUES (4);\n")},
	"00005_step.sql":  {Data: []byte("-- +goose Up\nINSERT INTO steps VALUES (5);\n")},
}}

// TestReplicasStartingTogether starts four instances of one service at once,
// as kubectl scale or a rolling update with a migration does, on a database
// that does not exist yet (the instances race to create it) and on an empty
// one (they race to migrate it): every instance must come up, and each
// migration must have run exactly once.
func TestReplicasStartingTogether(t *testing.T) {
	t.Parallel()
	const replicas = 4
	server := postgrestest.ServerURL(t)
	sets := []postgres.MigrationSet{outbox.Schema(), inbox.Schema(), stepsSet}
	tests := []struct {
		name    string
		present bool
		rounds  int
	}{
		{"fresh database", false, 5},
		{"database present", true, 3},
	}
	for _, tt := range tests {
		for round := range tt.rounds {
			t.Run(fmt.Sprintf("%s round %d", tt.name, round+1), func(t *testing.T) {
				t.Parallel() // each round has a database of its own
				startReplicas(t, server, tt.present, replicas, sets)
			})
		}
	}
}

func startReplicas(t *testing.T, server string, present bool, replicas int, sets []postgres.MigrationSet) {
	name := postgrestest.UniqueName("t")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := postgres.DropDatabase(ctx, server, name); err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if present {
		if err := postgres.EnsureDatabase(ctx, server, name); err != nil {
			t.Fatal(err)
		}
	}
	start := make(chan struct{})
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			<-start
			db, err := postgres.OpenService(ctx, server, name, postgres.PoolConfig{MaxOpen: 4}, sets...)
			if err == nil {
				db.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
	if t.Failed() {
		return
	}
	dsn, err := postgres.WithDatabase(server, name)
	if err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, dsn, postgres.PoolConfig{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var steps []int
	if err := db.Select(&steps, `SELECT step FROM steps ORDER BY step`); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(steps) != "[1 2 3 4 5]" {
		t.Errorf("steps applied %v, want each of 1..5 once", steps)
	}
	for _, set := range sets {
		var applied, distinct int
		q := `SELECT count(*), count(DISTINCT version_id) FROM goose_` + set.Name + ` WHERE version_id > 0`
		if err := db.QueryRow(q).Scan(&applied, &distinct); err != nil {
			t.Fatal(err)
		}
		if applied == 0 || applied != distinct {
			t.Errorf("set %s: %d versions recorded, %d distinct, want each once", set.Name, applied, distinct)
		}
	}
}

// TestMigrateWithAPoolOfOne: the migration lock holds a connection of its
// own, and a service with a pool of one connection still migrates.
func TestMigrateWithAPoolOfOne(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t)
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := postgres.Migrate(ctx, db, stepsSet); err != nil {
		t.Fatal(err)
	}
	if got := db.Stats().MaxOpenConnections; got != 1 {
		t.Fatalf("pool of %d after the migration, want 1 again", got)
	}
	var steps int
	if err := db.Get(&steps, `SELECT count(*) FROM steps`); err != nil {
		t.Fatal(err)
	}
	if steps != 5 {
		t.Fatalf("%d steps, want 5", steps)
	}
}
