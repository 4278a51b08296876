package inbox

import (
	"context"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

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
