package inbox

import (
	"context"
	"errors"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// ErrContended is what a statement queued with BeforeCommit returns when
// rows the apply read without locking them changed before it wrote them:
// the transaction is rolled back and run again at once, with Locking true.
var ErrContended = errors.New("rows read without a lock changed before the write")

// BeforeCommit queues fn to run in tx after everything else the inbox
// transaction writes (the side effects, the version guard's record, the
// outcomes), just before the commit. It is for rows that every batch of
// every instance writes, such as a hot SKU's stock: a row lock is held
// until the commit, so the later it is taken the shorter other batches
// queue behind it. Outside an inbox transaction fn runs at once.
func BeforeCommit(ctx context.Context, tx *sqlx.Tx, fn func(ctx context.Context, tx *sqlx.Tx) error) error {
	if last, ok := ctx.Value(lastKey{}).(*[]statement); ok {
		*last = append(*last, fn)
		return nil
	}
	return fn(ctx, tx)
}

// Locking reports whether the apply runs again because a statement it
// queued with BeforeCommit returned ErrContended: it should now lock what
// it reads, so that the second run cannot fail the same way.
func Locking(ctx context.Context) bool {
	locking, _ := ctx.Value(lockingKey{}).(bool)
	return locking
}

// AfterCommit queues fn to run once the inbox transaction has committed,
// such as waking the outbox relay for the rows the apply added
// (outbox.Relay.Wake), and reports whether it did. A rolled-back run
// drops what it queued. Outside an inbox transaction it does nothing and
// reports false: the caller commits, and runs fn after it.
func AfterCommit(ctx context.Context, fn func()) bool {
	after, ok := ctx.Value(afterKey{}).(*[]func())
	if ok {
		*after = append(*after, fn)
	}
	return ok
}

type (
	statement  = func(context.Context, *sqlx.Tx) error
	lastKey    struct{}
	afterKey   struct{}
	lockingKey struct{}
)

// inTx applies envs in one transaction, with the statements queued by
// BeforeCommit last, and once more with Locking if one of them found its
// rows changed; what AfterCommit queued runs once it has committed.
func (p *Processor) inTx(ctx context.Context, envs []event.Envelope) ([]versionguard.Outcome, error) {
	run := func(ctx context.Context) ([]versionguard.Outcome, error) {
		var (
			outcomes []versionguard.Outcome
			after    []func()
		)
		ctx = context.WithValue(ctx, afterKey{}, &after)
		err := postgres.InTx(ctx, p.db, func(tx *sqlx.Tx) error {
			var last []statement
			ctx := context.WithValue(ctx, lastKey{}, &last)
			var err error
			if outcomes, err = p.applyBatch(ctx, tx, envs); err != nil {
				return err
			}
			for _, fn := range last {
				if err := fn(ctx, tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, fn := range after {
			fn()
		}
		return outcomes, nil
	}
	outcomes, err := run(ctx)
	if errors.Is(err, ErrContended) {
		return run(context.WithValue(ctx, lockingKey{}, true))
	}
	return outcomes, err
}
