package service_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
)

// TestServicePrunesWhatItRetains starts a service with the outbox's
// retention rule: its pruner deletes the SENT row past the window at
// start and keeps the newer one, and /metrics shows the rows deleted and
// the sizes of the retained tables and of the idempotency keys.
func TestServicePrunesWhatItRetains(t *testing.T) {
	cfg := testConfig(t)
	var svc *service.Service
	base := startService(t, cfg, service.Options{Migrations: []postgres.MigrationSet{outbox.Schema()}}, func(s *service.Service) {
		svc = s
		for id, age := range map[string]string{"old": "8 days", "new": "1 day"} {
			if _, err := s.DB.Exec(`INSERT INTO outbox_events (event_id, aggregate_id, aggregate_version, event_type, topic, payload, status, sent_at)
				VALUES ($1, 'O-1', 1, 'OrderCreated', 'order-events', '{}', 'SENT', now() - $2::interval)`, id, age); err != nil {
				t.Fatal(err)
			}
		}
		s.Retain(outbox.RetentionRule(s.Config.Retention.OutboxSent))
	})
	if svc.Config.Retention.OutboxSent != outbox.DefaultSentRetention {
		t.Fatalf("outbox retention %s, want the default %s", svc.Config.Retention.OutboxSent, outbox.DefaultSentRetention)
	}
	poll.Until(t, 10*time.Second, "the old SENT row pruned", func() bool {
		var left []string
		if err := svc.DB.Select(&left, `SELECT event_id FROM outbox_events`); err != nil {
			t.Fatal(err)
		}
		return strings.Join(left, ",") == "new"
	})
	_, _, metrics := send(t, http.MethodGet, base+"/metrics", "", nil)
	for _, want := range []string{
		`retention_deleted_rows_total{table="outbox_events"} 1`,
		`db_table_size_bytes{table="outbox_events"}`,
		`db_table_size_bytes{table="idempotency_keys"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
