package devrun_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/scripts/devrun"
)

func TestEnsureDatabasesCreatesOnlyMissingOnes(t *testing.T) {
	url := databaseURL(t)
	// A name that needs quoting proves QuoteIdentifier is used.
	a, b := uniqueName("a"), uniqueName("B-x")
	dropAfter(t, url, a, b)
	ctx := context.Background()

	tests := []struct {
		name    string
		names   []string
		created []string
	}{
		{"first run creates", []string{a}, []string{a}},
		{"second run creates only the new one", []string{a, b}, []string{b}},
		{"third run creates nothing", []string{a, b}, nil},
	}
	for _, tt := range tests {
		created, err := devrun.EnsureDatabases(ctx, url, tt.names)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !slices.Equal(created, tt.created) {
			t.Errorf("%s: created %v, want %v", tt.name, created, tt.created)
		}
	}
	for _, name := range []string{a, b} {
		if !databaseExists(t, url, name) {
			t.Errorf("database %s missing", name)
		}
	}
}

func TestEnsureDatabasesNamesAnUnreachableServer(t *testing.T) {
	_, err := devrun.EnsureDatabases(context.Background(), "postgres://u:secret@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", []string{"x"})
	if err == nil {
		t.Fatal("no error for a server that is not there")
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "secret") {
		t.Errorf("error should name the server and hide the password: %v", err)
	}
}
