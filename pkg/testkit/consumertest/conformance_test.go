package consumertest_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
)

func TestFeaturesValidate(t *testing.T) {
	tests := []struct {
		name    string
		f       consumertest.Features
		wantErr []string
	}{
		{"complete", consumertest.Features{Consumer: "c", FailPoint: "c.apply", App: "internal/app"}, nil},
		{"ignoring refunds", consumertest.Features{Consumer: "c", FailPoint: "c.apply", App: "internal/app", IgnoresRefunds: true}, nil},
		{"no consumer", consumertest.Features{FailPoint: "c.apply", App: "internal/app"}, []string{"Consumer"}},
		{"no fail point", consumertest.Features{Consumer: "c", App: "internal/app"}, []string{"FailPoint"}},
		{"no application package", consumertest.Features{Consumer: "c", FailPoint: "c.apply"}, []string{"App"}},
		{"nothing", consumertest.Features{}, []string{"Consumer", "FailPoint", "App"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.Validate()
			if (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Validate() = %v, want an error naming %v", err, tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to name %s", err, w)
				}
			}
		})
	}
}

// The suite's orders and builders make events the contract accepts.
func TestBuildersMakeValidEvents(t *testing.T) {
	o := consumertest.NewOrder("O-1")
	if o != (consumertest.Order{ID: "O-1", SKU: "SKU-O-1", Customer: "C-O-1"}) {
		t.Fatalf("order %+v", o)
	}
	lines := consumertest.Items(consumertest.Item(o.SKU, consumertest.Units))
	envs := []event.Envelope{
		consumertest.Event(t, event.OrderPaid, o.ID, 3, consumertest.PaidData(o.Customer, consumertest.PaidAmount, lines...)),
		consumertest.Event(t, event.OrderRefunded, o.ID, 5, consumertest.RefundedData(o.Customer, consumertest.PaidAmount, lines, lines)),
		consumertest.EventV(t, event.OrderRefunded, o.ID, 5, 1, event.OrderRefundedV1Data{RefundID: "R-1", PaymentID: "P-1",
			RefundedAmount: consumertest.Money("80.00"), Currency: "CNY", CustomerID: o.Customer, Items: lines}),
		consumertest.OrderPaid(t, o.ID, "80.00", lines...),
		consumertest.OrderRefunded(t, o.ID, 5, "0.01", "0.01", nil, lines),
		consumertest.OrderRefundedV1(t, o.ID, "80.00", lines...),
	}
	for _, typ := range []event.Type{event.OrderCreated, event.OrderCheckedOut, event.OrderPaid, event.OrderRefundRequested,
		event.OrderRefunded, event.OrderRefundRejected, event.OrderCancelled, event.OrderPaymentRejected, event.OrderPaymentReturned} {
		envs = append(envs, consumertest.Sample(t, typ, o.ID, 4))
	}
	for _, env := range envs {
		raw, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := event.Parse(raw); err != nil {
			t.Errorf("%s v%d: %v", env.EventType, env.EventVersion, err)
		}
	}
	if got := consumertest.Items(); got == nil || len(got) != 0 {
		t.Errorf("Items() = %#v, want an empty list, not null", got)
	}
}

// DatabaseImports finds every import of a database package in a
// package's files, its tests aside.
func TestDatabaseImports(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    []string
		wantErr bool
	}{
		{"none", map[string]string{"app.go": "package app\n\nimport (\n\t\"context\"\n\n\t\"github.com/reliable-orders/fulfillment/pkg/versionguard\"\n)\n"}, nil, false},
		{"sqlx and database/sql", map[string]string{
			"app.go":   "package app\n\nimport \"github.com/jmoiron/sqlx\"\n",
			"store.go": "package app\n\nimport (\n\tsql \"database/sql\"\n\t\"github.com/jackc/pgx/v5\"\n)\n",
		}, []string{"app.go: github.com/jmoiron/sqlx", "store.go: database/sql", "store.go: github.com/jackc/pgx/v5"}, false},
		{"a look-alike path is no database package", map[string]string{"app.go": "package app\n\nimport \"github.com/lib/pqueue\"\n"}, nil, false},
		{"tests aside", map[string]string{
			"app.go":      "package app\n",
			"app_test.go": "package app_test\n\nimport \"github.com/jmoiron/sqlx\"\n",
		}, nil, false},
		{"no Go file", map[string]string{"README.md": "# app\n"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, src := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := consumertest.DatabaseImports(dir)
			if (err != nil) != tt.wantErr {
				t.Fatalf("DatabaseImports = %v, %v; want an error %v", got, err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("DatabaseImports = %q, want %q", got, tt.want)
			}
		})
	}
}
