package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// DLQSuite is what the dead-letter page reads and does; *suiteapi.Client
// is one.
type DLQSuite interface {
	DeadLetters(ctx context.Context, service, aggregateID, status string) ([]suiteapi.DeadLetter, error)
	ReplayWithKey(ctx context.Context, service string, id int64, requestedBy, key string) (suiteapi.ReplayResult, error)
}

// DeadLetterQueue lists every consumer's dead letters and replays one.
type DeadLetterQueue struct {
	suite  DLQSuite
	logger *slog.Logger
}

// NewDeadLetterQueue returns the dead-letter queue of suite; logger
// records every replay asked for.
func NewDeadLetterQueue(suite DLQSuite, logger *slog.Logger) *DeadLetterQueue {
	return &DeadLetterQueue{suite: suite, logger: logger}
}

// The statuses of a dead letter (pkg/dlq).
const (
	StatusDead     = "DEAD"
	StatusReplayed = "REPLAYED"
)

// ErrNotAConsumer is a replay asked of a service that keeps no dead
// letters.
var ErrNotAConsumer = errors.New("not a consumer")

// List returns the dead letters of every consumer with status (DEAD,
// REPLAYED; "" all), newest first, and the consumers that did not answer.
func (q *DeadLetterQueue) List(ctx context.Context, status string) ([]DeadLetter, []Unread) {
	var (
		mu     sync.Mutex
		out    []DeadLetter
		unread []Unread
	)
	g, gctx := errgroup.WithContext(ctx)
	for _, svc := range Consumers {
		g.Go(func() error {
			items, err := q.suite.DeadLetters(gctx, svc, "", status)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unread = append(unread, Unread{Service: svc, What: "dead letters", Error: err.Error()})
				return nil
			}
			for _, d := range items {
				out = append(out, DeadLetter{Service: svc, DeadLetter: d})
			}
			return nil
		})
	}
	_ = g.Wait() // every error is in unread
	slices.SortFunc(out, func(a, b DeadLetter) int {
		return cmp.Or(b.DeadLetteredAt.Compare(a.DeadLetteredAt), cmp.Compare(a.Service, b.Service), cmp.Compare(b.ID, a.ID))
	})
	slices.SortFunc(unread, func(a, b Unread) int { return cmp.Compare(a.Service, b.Service) })
	return out, unread
}

// Replay sends dead letter id of service back to its consumer in the name
// of operator, who the service's audit records; key is the request's
// Idempotency-Key, the same for every time the one replay is asked. The
// console logs it too.
func (q *DeadLetterQueue) Replay(ctx context.Context, service string, id int64, operator, key string) (suiteapi.ReplayResult, error) {
	if !slices.Contains(Consumers, service) {
		return suiteapi.ReplayResult{}, fmt.Errorf("%w: %q (want one of %s)", ErrNotAConsumer, service, strings.Join(Consumers, ", "))
	}
	res, err := q.suite.ReplayWithKey(ctx, service, id, operator, key)
	if err != nil {
		q.logger.WarnContext(ctx, "dead letter replay failed", "consumer", service, "id", id, "operator", operator, "error", err)
		return res, fmt.Errorf("replay dead letter %d of %s: %w", id, service, err)
	}
	q.logger.InfoContext(ctx, "dead letter replayed", "consumer", service, "id", id, "operator", operator,
		"eventId", res.EventID, "outcome", res.Outcome)
	return res, nil
}
