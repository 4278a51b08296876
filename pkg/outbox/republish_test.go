package outbox_test

import (
	"context"
	"errors"
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

// countingSink accepts everything and counts the sends of each event.
type countingSink struct {
	mu    sync.Mutex
	sends map[string]int
}

func (s *countingSink) Send(_ context.Context, msgs []outbox.Message) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.sends[m.EventID]++
	}
	return len(msgs), nil
}

func (s *countingSink) count(eventID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends[eventID]
}

func addRow(t *testing.T, db *sqlx.DB, orderID string) outbox.Message {
	t.Helper()
	msg := paid(t, "t", orderID, 3)
	if err := postgres.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
		return outbox.Add(context.Background(), tx, msg)
	}); err != nil {
		t.Fatal(err)
	}
	return msg
}

func quietRelay(t *testing.T, db *sqlx.DB, sink outbox.Sink, cfg outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	r, err := outbox.NewRelay(db, sink, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRepublish(t *testing.T) {
	tests := []struct {
		name string
		// seed writes the row and returns the event id to republish.
		seed         func(t *testing.T, db *sqlx.DB) string
		wantErr      error
		wantAttempts int
	}{
		{
			name: "a SENT row is PENDING again and due now",
			seed: func(t *testing.T, db *sqlx.DB) string {
				msg := addRow(t, db, "O-sent")
				relay := quietRelay(t, db, &countingSink{sends: map[string]int{}}, outbox.DefaultRelayConfig())
				if n, err := relay.RunOnce(context.Background()); n != 1 || err != nil {
					t.Fatalf("RunOnce = %d, %v", n, err)
				}
				return msg.EventID
			},
			wantAttempts: 1,
		},
		{
			name: "a PENDING row backing off is due now and keeps its attempts",
			seed: func(t *testing.T, db *sqlx.DB) string {
				msg := addRow(t, db, "O-backoff")
				if _, err := db.Exec(`UPDATE outbox_events SET attempts = 3, last_error = 'broker down',
					next_attempt_at = now() + interval '1 hour' WHERE event_id = $1`, msg.EventID); err != nil {
					t.Fatal(err)
				}
				return msg.EventID
			},
			wantAttempts: 3,
		},
		{
			name:    "an unknown event id is not found",
			seed:    func(*testing.T, *sqlx.DB) string { return "E-unknown" },
			wantErr: outbox.ErrNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, _ := postgrestest.NewDatabase(t, outbox.Schema())
			id := tt.seed(t, db)
			before := time.Now()
			got, err := outbox.Republish(context.Background(), db, id, "alice")
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Republish = %+v, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.EventID != id || got.Status != outbox.StatusPending || got.SentAt != nil || got.Attempts != tt.wantAttempts {
				t.Fatalf("Republish = %+v, want %s PENDING, not sent, %d attempts", got, id, tt.wantAttempts)
			}
			if got.NextAttemptAt.After(before.Add(time.Second)) {
				t.Fatalf("next attempt at %s, want now (%s)", got.NextAttemptAt, before)
			}
			stored, err := outbox.Lookup(context.Background(), db, id)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Status != got.Status || stored.Attempts != got.Attempts || !stored.NextAttemptAt.Equal(got.NextAttemptAt) || stored.SentAt != nil {
				t.Fatalf("stored %+v, answered %+v", stored, got)
			}
			if stored.RepublishedBy == nil || *stored.RepublishedBy != "alice" || stored.RepublishedAt == nil {
				t.Fatalf("stored %+v: the republish is not audited with who asked", stored)
			}
		})
	}
}

// TestRepublishedRowIsSentAgain polls once an hour, so the republished row
// can only leave again through the notification Republish sends.
func TestRepublishedRowIsSentAgain(t *testing.T) {
	db, name := postgrestest.NewDatabase(t, outbox.Schema())
	url, err := postgres.WithDatabase(postgrestest.ServerURL(t), name)
	if err != nil {
		t.Fatal(err)
	}
	msg := addRow(t, db, "O-1")
	sink := &countingSink{sends: map[string]int{}}
	cfg := outbox.DefaultRelayConfig()
	cfg.PollInterval, cfg.ListenURL = time.Hour, url
	relay := quietRelay(t, db, sink, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return relay.Run(ctx) })
	defer func() {
		cancel()
		_ = g.Wait()
	}()

	poll.Until(t, 30*time.Second, "the row relayed once", func() bool { return sink.count(msg.EventID) == 1 })
	poll.Until(t, 30*time.Second, "the row marked SENT", func() bool {
		s, err := outbox.Lookup(ctx, db, msg.EventID)
		return err == nil && s.Status == outbox.StatusSent
	})
	if _, err := outbox.Republish(ctx, db, msg.EventID, "alice"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the republished row sent again with a one-hour poll interval", func() bool {
		return sink.count(msg.EventID) == 2
	})
	poll.Until(t, 30*time.Second, "the row SENT again", func() bool {
		s, err := outbox.Lookup(ctx, db, msg.EventID)
		return err == nil && s.Status == outbox.StatusSent && s.Attempts == 2 && s.SentAt != nil
	})
}
