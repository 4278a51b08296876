package consumer

import (
	"context"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
)

// Sender delivers one notification. It is called inside the inbox
// transaction of the event it tells about, so it must not reach outside the
// database: if the transaction rolls back after an email went out, the
// redelivery sends it again.
//
// A real email or SMS sender is therefore called through an outbox, not
// here: Send writes an outbox row in this transaction, and a relay calls the
// provider after commit, at least once, passing the eventId as the
// provider's idempotency key.
type Sender interface {
	Send(ctx context.Context, n notification.Notification) error
}

// SenderFactory binds a Sender to the transaction of one event.
type SenderFactory func(tx *sqlx.Tx) Sender

// Recorder stores a notification inside a transaction.
type Recorder interface {
	Record(ctx context.Context, tx *sqlx.Tx, n notification.Notification) error
}

// DBSink is the default sender: it records each notification in the
// notifications table, in the event's transaction, and logs one line. The
// table is the customer's in-app inbox and the proof, for tests and drills,
// that each event was told once.
func DBSink(rec Recorder, logger *slog.Logger) SenderFactory {
	return func(tx *sqlx.Tx) Sender { return dbSender{rec: rec, tx: tx, logger: logger} }
}

type dbSender struct {
	rec    Recorder
	tx     *sqlx.Tx
	logger *slog.Logger
}

// Send records n in the event's transaction and logs it.
func (s dbSender) Send(ctx context.Context, n notification.Notification) error {
	if err := s.rec.Record(ctx, s.tx, n); err != nil {
		return err
	}
	// Logged before commit: the line says it was recorded, the commit that
	// follows makes it visible (a rollback means a redelivery logs it again).
	s.logger.InfoContext(ctx, "notification recorded",
		"orderId", n.OrderID, "kind", n.Kind, "channel", n.Channel)
	return nil
}
