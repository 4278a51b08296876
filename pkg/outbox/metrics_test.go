package outbox_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// The collector counts PENDING rows only and ages the oldest of them.
func TestBacklogCollector(t *testing.T) {
	db, _, _ := setup(t)
	sent, waiting := addRow(t, db, "O-1"), addRow(t, db, "O-2")
	addRow(t, db, "O-3")
	if _, err := db.Exec(`UPDATE outbox_events SET status = 'SENT', created_at = now() - interval '1 hour' WHERE event_id = $1`, sent.EventID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE outbox_events SET created_at = now() - interval '90 seconds' WHERE event_id = $1`, waiting.EventID); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(outbox.NewBacklogCollector(db, slog.New(slog.DiscardHandler)))
	want := `
# HELP outbox_pending_events Outbox rows not yet delivered to the sink.
# TYPE outbox_pending_events gauge
outbox_pending_events 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "outbox_pending_events"); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "outbox_oldest_pending_age_seconds" {
			if age := f.GetMetric()[0].GetGauge().GetValue(); age < 90 || age > 3600 {
				t.Fatalf("oldest pending age %v, want about 90 s", age)
			}
			return
		}
	}
	t.Fatal("outbox_oldest_pending_age_seconds missing")
}

func TestReadRelayEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    func(outbox.RelayConfig) bool
		wantErr string
	}{
		{"defaults", nil, func(c outbox.RelayConfig) bool { return c == outbox.DefaultRelayConfig() }, ""},
		{"set", map[string]string{"OUTBOX_BATCH_SIZE": "100", "OUTBOX_POLL_INTERVAL": "50ms",
			"OUTBOX_BACKOFF_INITIAL": "2s", "OUTBOX_BACKOFF_MAX": "1m"}, func(c outbox.RelayConfig) bool {
			return c.BatchSize == 100 && c.PollInterval == 50*time.Millisecond && c.BackoffInitial == 2*time.Second && c.BackoffMax == time.Minute
		}, ""},
		{"batch of zero", map[string]string{"OUTBOX_BATCH_SIZE": "0"}, nil, "OUTBOX_BATCH_SIZE=0"},
		{"backoff upside down", map[string]string{"OUTBOX_BACKOFF_INITIAL": "1m", "OUTBOX_BACKOFF_MAX": "1s"}, nil, "OUTBOX_BACKOFF_MAX=1s"},
		{"malformed", map[string]string{"OUTBOX_POLL_INTERVAL": "soon"}, nil, "OUTBOX_POLL_INTERVAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := envconfig.New(func(k string) string { return tt.env[k] })
			c := outbox.ReadRelayEnv(r)
			err := r.Err()
			if err == nil {
				err = c.Validate()
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.want(c) {
				t.Fatalf("ReadRelayEnv = %+v, %v", c, err)
			}
		})
	}
}
