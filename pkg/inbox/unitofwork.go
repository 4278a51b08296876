package inbox

import (
	"context"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// AfterCommit queues fn to run once the inbox transaction has committed,
// for an apply of the single-event form (versionguard.ApplyFunc), which is
// handed the transaction alone, and reports whether it did. Outside an
// inbox transaction it does nothing and reports false: the caller commits,
// and runs fn after it. An apply that is handed its unit of work queues
// with versionguard.UnitOfWork.AfterCommit.
func AfterCommit(ctx context.Context, fn func()) bool {
	uow, ok := versionguard.UnitOfWorkFrom(ctx)
	if ok {
		uow.AfterCommit(fn)
	}
	return ok
}

// inTx applies envs in one unit of work (versionguard.InUnitOfWork): what
// the apply queued with BeforeCommit runs last, and everything once more,
// locking, if one of those found its rows changed.
func (p *Processor) inTx(ctx context.Context, envs []event.Envelope) ([]versionguard.Outcome, error) {
	var outcomes []versionguard.Outcome
	err := versionguard.InUnitOfWork(ctx, p.db, func(uow *versionguard.UnitOfWork) error {
		var err error
		outcomes, err = p.applyBatch(ctx, uow, envs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return outcomes, nil
}
