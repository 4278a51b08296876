package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// ParkingConfig bounds how long the version guard may hold an event that
// waits for its predecessor (WAITING_FOR_GAP). Parked past a deadline
// (docs/design.md, Version guard and parking), an event is counted,
// alerted on and dead-lettered, so a predecessor lost for good shows up
// instead of holding its successor forever.
type ParkingConfig struct {
	// Deadline is how long an event may stay parked.
	Deadline time.Duration
	// SweepInterval is how often parked events are checked against it.
	SweepInterval time.Duration
}

// DefaultParkingConfig gives a late predecessor five minutes (far beyond a
// retry bound or a consumer restart), checked every ten seconds.
func DefaultParkingConfig() ParkingConfig {
	return ParkingConfig{Deadline: 5 * time.Minute, SweepInterval: 10 * time.Second}
}

// Validate reports an unusable deadline or interval.
func (c ParkingConfig) Validate() error {
	if c.Deadline <= 0 || c.SweepInterval <= 0 {
		return errors.New("park deadline and sweep interval must be positive")
	}
	return nil
}

// ParkedEvents is the version guard's parking as the sweeper needs it.
// Services pass their *inbox.Processor, which also forgets the dedup rows
// of the events it takes, so a replay after the fix is applied.
type ParkedEvents interface {
	TakeExpired(ctx context.Context, tx *sqlx.Tx, olderThan time.Duration, limit int) ([]versionguard.Expired, error)
	CountParked(ctx context.Context, q sqlx.QueryerContext) (int, error)
}

// sweepBatch bounds the events dead-lettered in one transaction, so a
// large backlog of expired events does not hold one transaction open long.
const sweepBatch = 100

// GapSweeper dead-letters the events parked for longer than the deadline,
// exactly as the router dead-letters a message (a dead_letters record and a
// DLQ topic message with the metadata of docs/design.md, Dead letters),
// with errorClass PERMANENT and a failureReason starting with
// WAITING_FOR_GAP that names the missing predecessor.
type GapSweeper struct {
	db     *sqlx.DB
	parked ParkedEvents
	cfg    ParkingConfig
	dead   deadLetterer
}

// NewGapSweeper returns the sweeper of cfg's consumer; run it with Run.
func NewGapSweeper(cfg Config, parking ParkingConfig, db *sqlx.DB, parked ParkedEvents,
	dlqPublisher message.Publisher, metrics *Metrics, logger *slog.Logger,
) (*GapSweeper, error) {
	if err := errors.Join(cfg.Validate(), parking.Validate()); err != nil {
		return nil, err
	}
	if db == nil || parked == nil || dlqPublisher == nil || logger == nil {
		return nil, errors.New("gap sweeper: database, parked events, DLQ publisher and logger are required")
	}
	return &GapSweeper{db: db, parked: parked, cfg: parking,
		dead: deadLetterer{cfg: cfg, publisher: dlqPublisher, metrics: metrics, logger: logger}}, nil
}

// Run sweeps at once and then every SweepInterval until ctx ends, and
// returns nil then. A failed sweep (database or broker down) is logged and
// tried again at the next interval: it leaves the events parked.
func (s *GapSweeper) Run(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.SweepInterval)
	defer tick.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.dead.logger.WarnContext(ctx, "gap sweep failed; trying again at the next interval",
				"consumer", s.dead.cfg.Consumer, "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Sweep dead-letters every event parked past the deadline and returns how
// many it dead-lettered. Each batch is one transaction that takes the
// events out of the parking, records their dead letters and publishes them
// to the DLQ topic before it commits: an event leaves the parking only with
// its dead letter recorded and published. A failure rolls the batch back;
// the next sweep tries again (and may publish a DLQ message twice, as the
// router may when its record fails after the publish).
func (s *GapSweeper) Sweep(ctx context.Context) (int, error) {
	consumer := s.dead.cfg.Consumer
	total := 0
	for {
		var recs []dlq.Record
		err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
			recs = recs[:0]
			expired, err := s.parked.TakeExpired(ctx, tx, s.cfg.Deadline, sweepBatch)
			if err != nil {
				return err
			}
			for _, e := range expired {
				rec, err := s.record(e)
				if err != nil {
					return err
				}
				if _, err := dlq.Insert(ctx, tx, rec); err != nil {
					return err
				}
				if err := s.dead.publish(rec); err != nil {
					return err
				}
				recs = append(recs, rec)
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("dead-letter expired parked events: %w", err)
		}
		for _, rec := range recs {
			s.dead.done(ctx, rec)
			s.dead.metrics.gapTimedOut(consumer)
		}
		total += len(recs)
		if len(recs) < sweepBatch {
			break
		}
	}
	n, err := s.parked.CountParked(ctx, s.db)
	if err != nil {
		return total, err
	}
	s.dead.metrics.parkedNow(consumer, n)
	return total, nil
}

// record is the dead letter of an expired parked event. The parking keeps
// the event, not the Kafka record, so the message is rebuilt as the outbox
// relay publishes it (same key, eventId and headers) and its original
// partition and offset are unknown (-1).
func (s *GapSweeper) record(e versionguard.Expired) (dlq.Record, error) {
	payload, err := e.Event.Marshal()
	if err != nil {
		return dlq.Record{}, fmt.Errorf("rebuild parked event %s: %w", e.Event.EventID, err)
	}
	cause := fmt.Errorf("%s v%d parked at %s, past the %s deadline; missing: %s",
		e.Event.EventType, e.Event.AggregateVersion, e.ParkedAt.UTC().Format(time.RFC3339), s.cfg.Deadline, e.Missing())
	rec := s.dead.record(Permanent, string(versionguard.WaitingForGap), cause)
	rec.EventID = e.Event.EventID
	rec.AggregateID = e.Event.AggregateID
	rec.EventType = string(e.Event.EventType)
	rec.Key = []byte(e.Event.AggregateID)
	rec.Value = payload
	rec.Headers = e.Event.Headers()
	rec.Attempts = 1
	rec.FirstFailedAt = e.ParkedAt.UTC()
	return rec, nil
}
