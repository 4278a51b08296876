package app

import (
	"context"
	"log/slog"

	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
)

// Sender delivers the notifications of a batch of events. It is called
// in the unit of work of those events, so it must not reach outside the
// database: if the transaction rolls back after an email went out, the
// redelivery sends it again.
//
// A real email or SMS sender is therefore called through an outbox, not
// here: Send writes an outbox row in this transaction, and a relay calls the
// provider after commit, at least once, passing the eventId as the
// provider's idempotency key (and queues the relay's wake-up with the unit
// of work's AfterCommit).
type Sender interface {
	Send(ctx context.Context, ns []notification.Notification) error
}

// SenderFactory binds a Sender to the unit of work of a batch of events.
type SenderFactory func(uow *versionguard.UnitOfWork) Sender

// Recorder stores notifications in a unit of work.
type Recorder interface {
	Record(ctx context.Context, uow *versionguard.UnitOfWork, ns []notification.Notification) error
}

// DBSink is the default sender: it records the notifications in the
// notifications table, in their events' transaction, and logs one line per
// batch (one per notification at debug level). The
// table is the customer's in-app inbox and the proof, for tests and drills,
// that each event was told once.
func DBSink(rec Recorder, logger *slog.Logger) SenderFactory {
	return func(uow *versionguard.UnitOfWork) Sender { return dbSender{rec: rec, uow: uow, logger: logger} }
}

type dbSender struct {
	rec    Recorder
	uow    *versionguard.UnitOfWork
	logger *slog.Logger
}

// Send records ns in their events' unit of work and logs them.
func (s dbSender) Send(ctx context.Context, ns []notification.Notification) error {
	if err := s.rec.Record(ctx, s.uow, ns); err != nil {
		return err
	}
	// Logged before commit: the lines say they were recorded, the commit
	// that follows makes them visible (a rollback means a redelivery logs
	// them again).
	for _, n := range ns {
		s.logger.DebugContext(ctx, "notification recorded",
			"orderId", n.OrderID, "kind", n.Kind, "channel", n.Channel)
	}
	if len(ns) == 1 {
		s.logger.InfoContext(ctx, "notification recorded",
			"orderId", ns[0].OrderID, "kind", ns[0].Kind, "channel", ns[0].Channel)
	} else {
		s.logger.InfoContext(ctx, "notifications recorded", "count", len(ns))
	}
	return nil
}
