package versionguard

import (
	"context"
	"errors"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// UnitOfWork is one transaction of a consumer: the dedup rows, the version
// guard's rows and the consumer's side effects commit together in it or
// not at all. The kit opens it (InUnitOfWork) and hands it to the
// consumer's apply function (ApplyFunc, BatchApplyFunc, FactFunc), which hands it on
// to its adapters: they write in its transaction (Tx), and the apply
// queues there what must run just before the commit (BeforeCommit) or once
// it has committed (AfterCommit). Passing it as an argument keeps what a
// transaction carries visible in every signature it crosses, and lets an
// application package name it without importing a database package.
type UnitOfWork struct {
	tx      *sqlx.Tx
	locking bool
	before  []func(context.Context) error
	after   []func()
}

// ErrContended is what a function queued with BeforeCommit returns when
// rows the apply read without locking them changed before it wrote them:
// the unit of work is rolled back and run again at once, with Locking
// true.
var ErrContended = errors.New("rows read without a lock changed before the write")

// Tx is the unit of work's transaction, for the adapters that write the
// consumer's side effects. They never commit or roll it back: the kit
// does, with the dedup rows and the version guard's rows.
func (u *UnitOfWork) Tx() *sqlx.Tx { return u.tx }

// BeforeCommit queues fn to run in the transaction after everything else
// the unit of work writes (the side effects, the version guard's record,
// the outcomes), just before the commit, in the order queued. It is for
// rows that every batch of every instance writes, such as a hot SKU's
// stock: a row lock is held until the commit, so the later it is taken
// the shorter other batches queue behind it. fn returning ErrContended
// runs the unit of work again (Locking).
func (u *UnitOfWork) BeforeCommit(fn func(ctx context.Context) error) {
	u.before = append(u.before, fn)
}

// AfterCommit queues fn to run once the transaction has committed, such as
// waking the outbox relay for the rows the apply added (outbox.Relay.Wake).
// A rolled-back run drops what it queued.
func (u *UnitOfWork) AfterCommit(fn func()) {
	u.after = append(u.after, fn)
}

// Locking reports whether this is the second run of a unit of work whose
// first found, in a function queued with BeforeCommit, its rows changed
// (ErrContended): the apply should now lock what it reads and write it at
// once, so that this run cannot fail the same way.
func (u *UnitOfWork) Locking() bool { return u.locking }

// InUnitOfWork runs fn in one unit of work over db: a transaction in which
// fn runs, then what fn queued with BeforeCommit, then the commit, then
// what fn queued with AfterCommit. An error or a panic rolls the
// transaction back and drops what was queued. If the run fails with
// ErrContended (returned by a function queued with BeforeCommit), fn runs
// once more in a new unit of work whose Locking is true; the error of that
// run stands.
func InUnitOfWork(ctx context.Context, db *sqlx.DB, fn func(uow *UnitOfWork) error) error {
	err := inUnitOfWork(ctx, db, false, fn)
	if errors.Is(err, ErrContended) {
		return inUnitOfWork(ctx, db, true, fn)
	}
	return err
}

func inUnitOfWork(ctx context.Context, db *sqlx.DB, locking bool, fn func(uow *UnitOfWork) error) error {
	u := &UnitOfWork{locking: locking}
	err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		u.tx = tx
		if err := fn(u); err != nil {
			return err
		}
		// A queued function may queue another: it runs too, last.
		for i := 0; i < len(u.before); i++ {
			if err := u.before[i](ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, fn := range u.after {
		fn()
	}
	return nil
}
