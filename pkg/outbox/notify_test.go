package outbox_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// recordingSink accepts everything and remembers the aggregates it saw.
type recordingSink struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (s *recordingSink) Send(_ context.Context, msgs []outbox.Message) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.seen[m.AggregateID] = true
	}
	return len(msgs), nil
}

func (s *recordingSink) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[id]
}

// TestRelayWakesOnCommit polls once an hour, so the second row can only
// leave through the notification its insert sends on commit.
func TestRelayWakesOnCommit(t *testing.T) {
	db, name := postgrestest.NewDatabase(t, outbox.Schema())
	url, err := postgres.WithDatabase(postgrestest.ServerURL(t), name)
	if err != nil {
		t.Fatal(err)
	}
	sink := &recordingSink{seen: map[string]bool{}}
	cfg := outbox.DefaultRelayConfig()
	cfg.PollInterval, cfg.ListenURL = time.Hour, url
	var r *outbox.Relay
	r, err = outbox.NewRelay(db, sink, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return r.Run(ctx) })
	defer func() {
		cancel()
		_ = g.Wait()
	}()

	add := func(orderID string) {
		t.Helper()
		if err := postgres.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
			return outbox.Add(context.Background(), tx, paid(t, "t", orderID, 3))
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The first row may leave on the relay's first pass; once it has, the
	// relay waits for an hour or a notification.
	add("O-1")
	poll.Until(t, 30*time.Second, "the first row relayed", func() bool { return sink.has("O-1") })
	add("O-2")
	poll.Until(t, 30*time.Second, "the second row relayed with a one-hour poll interval (only the commit's notification can wake the relay)",
		func() bool { return sink.has("O-2") })
	// The sink has the row before the relay marks it SENT: wait for the mark.
	poll.Until(t, 30*time.Second, "both rows marked SENT", func() bool {
		var sent int
		if err := db.Get(&sent, `SELECT count(*) FROM outbox_events WHERE status = 'SENT'`); err != nil {
			t.Fatal(err)
		}
		return sent == 2
	})
}
