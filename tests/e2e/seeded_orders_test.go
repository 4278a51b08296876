package e2e_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/scripts/seedorders"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// TestSeededPaidOrdersReconcileClean: the orders scripts/seed_orders
// writes (paid, refunded in full, refunded in part) hold what each
// service holds for such an order once it converged: their events pass
// the event schemas, their callbacks decode, a reconciliation run over
// every order compares them all and finds nothing, a run after one
// payment's refunded amount is changed finds exactly that, and Remove
// leaves no row of theirs behind.
func TestSeededPaidOrdersReconcileClean(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	cfg := seedorders.Config{Prefix: "O-SEED-", Count: 30, RefundEvery: 3, CreatedAt: time.Now().Add(-time.Hour)}
	dsn := func(service string) (string, error) { return s.DatabaseURL(service), nil }
	if _, err := seedorders.Seed(t.Context(), dsn, cfg); err != nil {
		t.Fatal(err)
	}

	var events []struct {
		Type    string `db:"event_type"`
		Payload []byte `db:"payload"`
	}
	if err := s.DB("order").Select(&events,
		`SELECT event_type, payload FROM outbox_events WHERE aggregate_id LIKE 'O-SEED-%' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	// 10 paid orders with 3 events, 20 refunded with 5.
	if len(events) != 10*3+20*5 {
		t.Fatalf("%d order events, want 130", len(events))
	}
	for _, e := range events {
		if err := event.Validate(e.Payload); err != nil {
			t.Fatalf("%s %s: %v", e.Type, e.Payload, err)
		}
	}
	var callbacks [][]byte
	if err := s.DB("payment").Select(&callbacks,
		`SELECT payload FROM outbox_events WHERE aggregate_id LIKE 'O-SEED-%' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(callbacks) != 30+20 {
		t.Fatalf("%d callbacks, want 50", len(callbacks))
	}
	for _, raw := range callbacks {
		var c event.Callback
		if err := json.Unmarshal(raw, &c); err != nil || c.CallbackID == "" || c.OrderID == "" || c.PaymentID == "" {
			t.Fatalf("callback %s: %+v, %v", raw, c, err)
		}
	}

	api := s.API()
	run, err := api.RunReconciliation(t.Context(), "e2e", suiteapi.RunRequest{MinAge: "0s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != "SUCCEEDED" || run.Checked != cfg.Count || len(run.Findings) != 0 {
		t.Fatalf("run over the seeded orders: %s, %d checked, findings %v; want SUCCEEDED, 30, none", run.Status, run.Checked, suiteapi.Kinds(run))
	}
	// The run's answer says what it did: it compared the orders, then read
	// every consumer's 30 effect orders (in one page each) and looked them
	// up at the order service.
	var scans []suiteapi.OrphanScan
	for _, service := range []string{"payment", "inventory", "points", "notification"} {
		scans = append(scans, suiteapi.OrphanScan{Service: service, Pages: 1, Orders: cfg.Count, Done: true})
	}
	if run.Phase != "ORPHANS" || !slices.Equal(run.OrphanScan, scans) || len(run.Phases) != 2 ||
		run.Phases[0].Phase != "COMPARING" || run.Phases[1].Phase != "ORPHANS" || run.Phases[1].FinishedAt == nil {
		t.Fatalf("run's progress: phase %s, phases %+v, orphan scans %+v; want ORPHANS last, COMPARING then ORPHANS, scans %+v",
			run.Phase, run.Phases, run.OrphanScan, scans)
	}

	// O-SEED-4 was refunded 40.00 of 100.00.
	if _, err := s.DB("payment").Exec(`UPDATE payments SET refunded = 30 WHERE order_id = 'O-SEED-4'`); err != nil {
		t.Fatal(err)
	}
	run, err = api.RunReconciliation(t.Context(), "e2e", suiteapi.RunRequest{MinAge: "0s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := suiteapi.Kinds(run); len(got) != 1 || got[0] != "AMOUNT_MISMATCH payment MANUAL_REVIEW" || run.Findings[0].OrderID != "O-SEED-4" {
		t.Fatalf("run after O-SEED-4's payment changed: %v, want its AMOUNT_MISMATCH alone", run.Findings)
	}

	if _, err := seedorders.Remove(t.Context(), dsn, cfg); err != nil {
		t.Fatal(err)
	}
	left := map[string][]string{
		"order":        {"orders", "order_refunds", "processed_callbacks", "outbox_events"},
		"payment":      {"payments", "refunds", "outbox_events", "processed_events", "aggregate_versions"},
		"inventory":    {"inventory_orders", "stock_movements", "stock", "processed_events", "aggregate_versions"},
		"points":       {"points_ledger", "processed_events", "aggregate_versions"},
		"notification": {"notifications", "processed_events", "aggregate_versions"},
	}
	for _, service := range seedorders.Services() {
		for _, table := range left[service] {
			var n int
			// Every seeded id (orders, events, SKUs) holds the prefix's SEED.
			q := fmt.Sprintf(`SELECT count(*) FROM %s AS x WHERE CAST(row_to_json(x) AS text) LIKE '%%SEED%%'`, table)
			if err := s.DB(service).Get(&n, q); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%s.%s: %d seeded rows left after Remove", service, table, n)
			}
		}
	}
}
