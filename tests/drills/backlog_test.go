package drills_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/backlog"
	"github.com/reliable-orders/fulfillment/scripts/drill"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// logWriter shows the drill's progress lines in the test log, with the
// time since the test started.
type logWriter struct {
	t     *testing.T
	start time.Time
}

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%6.1fs %s", time.Since(w.start).Seconds(), strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The backlog drill of `make drill-backlog` at small scale, with its mixed
// load: 1 300 orders, about 2 000 records (OrderPaid each, three in ten
// refunded, one in ten with a rejected refund, some refunds published
// before their payment, about one event in ten twice), inventory, points and
// notification scaled from one to two processes in their groups while the
// backlog drains; every event applied exactly once by each, every copy
// recognised as a duplicate, nothing dead-lettered, and the files written.
func TestBacklogDrill(t *testing.T) {
	const count, instances = 1300, 2
	start := time.Now()
	s := harness.Start(t, harness.Options{Env: map[string]string{"LOG_LEVEL": "info"}})
	target := s.BacklogTarget()
	out := t.TempDir()
	cfg := backlog.Config{
		RunID: "t" + drill.NewRunID(), Count: count, Mix: true, SKUs: 20, Instances: instances,
		ScaleAfter: 500 * time.Millisecond, Interval: 250 * time.Millisecond,
		Timeout: 4 * time.Minute, Out: out,
	}
	var table strings.Builder
	rep, err := backlog.Run(context.Background(), cfg, target, backlog.Output{Table: &table, Progress: logWriter{t, start}})
	t.Logf("\n%s", table.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !rep.Pass {
		t.Fatalf("the drill failed: see the table above")
	}
	t.Logf("%6.1fs the drill has ended", time.Since(start).Seconds())

	// The effects, counted here rather than taken from the drill's checks.
	load := backlog.LoadOf(cfg)
	if load.Refunded == 0 || load.RefundRejected == 0 || load.Republished == 0 {
		t.Fatalf("load %+v: no refund, rejection or copy to check", load)
	}
	runEvents := "E-" + cfg.RunID + "-%"
	counts := []struct {
		service, query string
		want           int
	}{
		{"inventory", `SELECT count(*) FROM stock_movements WHERE event_id LIKE $1 AND kind = 'DEDUCT'`, count},
		{"inventory", `SELECT count(*) FROM stock_movements WHERE event_id LIKE $1 AND kind = 'RESTOCK'`, load.Refunded},
		{"inventory", `SELECT coalesce(sum(deducted), 0) FROM stock WHERE sku LIKE 'SKU-' || $1`, count - load.Refunded},
		{"points", `SELECT count(DISTINCT order_id) FROM points_ledger WHERE event_id LIKE $1 AND entry_type = 'EARN'`, count},
		{"points", `SELECT count(*) FROM points_ledger WHERE event_id LIKE $1`, count + load.Refunded},
		{"points", `SELECT count(*) FROM points_ledger WHERE event_id LIKE $1 AND entry_type = 'REVERSAL'`, load.Refunded},
		{"notification", `SELECT count(DISTINCT order_id) FROM notifications WHERE event_id LIKE $1 AND kind = 'ORDER_PAID'`, count},
		{"notification", `SELECT count(*) FROM notifications WHERE event_id LIKE $1`, count + load.Refunded + load.RefundRejected},
		{"notification", `SELECT count(*) FROM notifications WHERE event_id LIKE $1 AND kind = 'REFUND_REJECTED'`, load.RefundRejected},
		// Every event of the run is notification's; each copy must have
		// been recognised as a duplicate (a rebalance may add more).
		{"notification", `SELECT count(*) FROM processed_events WHERE event_id LIKE $1`, load.Events},
		{"notification", `SELECT least(count(*) FILTER (WHERE duplicates > 0), $2) FROM processed_events WHERE event_id LIKE $1`, load.Republished},
		{"inventory", `SELECT count(*) FROM dead_letters WHERE event_id LIKE $1`, 0},
		{"points", `SELECT count(*) FROM dead_letters WHERE event_id LIKE $1`, 0},
		{"notification", `SELECT count(*) FROM dead_letters WHERE event_id LIKE $1`, 0},
	}
	for _, c := range counts {
		args := []any{runEvents}
		switch {
		case strings.Contains(c.query, "'SKU-' ||"):
			args = []any{cfg.RunID + "-%"}
		case strings.Contains(c.query, "$2"):
			args = append(args, c.want)
		}
		var got int
		if err := s.DB(c.service).Get(&got, c.query, args...); err != nil {
			t.Fatalf("%s: %s: %v", c.service, c.query, err)
		}
		if got != c.want {
			t.Errorf("%s: %s = %d, want %d", c.service, c.query, got, c.want)
		}
	}

	// Each scaled group ended with two members, each instance owning partitions.
	for _, g := range rep.Groups {
		if !g.Scaled {
			continue
		}
		owners := map[string]int{}
		for _, m := range g.Assignment {
			owners[m.Instance] += len(m.Partitions)
		}
		if len(owners) != instances || owners[g.Service] == 0 || owners[g.Service+"#2"] == 0 {
			t.Errorf("%s: assignment %+v, want partitions on %s and %s#2", g.Group, g.Assignment, g.Service, g.Service)
		}
	}
	// Scaled back to one instance each.
	for _, service := range backlog.DefaultServices() {
		if got := s.Instances(service); len(got) != 1 {
			t.Errorf("%s runs %d processes after the drill, want 1", service, len(got))
		}
	}

	// report.json holds every sample; report.html is self-contained.
	raw, err := os.ReadFile(filepath.Join(out, backlog.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Report  backlog.Report   `json:"report"`
		Samples []backlog.Sample `json:"samples"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatalf("%s: %v", backlog.JSONFile, err)
	}
	if len(file.Samples) < 2 || file.Report.RunID != cfg.RunID || file.Samples[len(file.Samples)-1].Published != count {
		t.Errorf("%s: %d samples, run %q, last published %d", backlog.JSONFile, len(file.Samples), file.Report.RunID,
			file.Samples[len(file.Samples)-1].Published)
	}
	page, err := os.ReadFile(filepath.Join(out, backlog.HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), "<svg"); n < 3 || strings.Contains(string(page), "src=") || strings.Contains(string(page), "<link") {
		t.Errorf("%s: %d charts, or an external asset", backlog.HTMLFile, n)
	}
}
