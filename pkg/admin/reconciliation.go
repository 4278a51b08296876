package admin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// MaxOrderIDs is the most orders one reconciliation request may ask for:
// a pass over 10 000 orders takes 10 to 20 calls, and one answer stays a
// few megabytes at most.
const MaxOrderIDs = 1000

// OrderIDsRequest is the body of POST /admin/reconciliation/orders, the
// batch view every service answers for reconciliation.
type OrderIDsRequest struct {
	OrderIDs []string `json:"orderIds"`
}

// BindOrderIDs decodes and checks the body of POST
// /admin/reconciliation/orders, the same in every service: 1 to
// MaxOrderIDs ids, each an id by the contract's rule. A broken rule is an
// *rules.RuleError naming the field (orderIds, orderIds[i]), which
// pkg/httpapi answers with 400 INVALID_REQUEST; malformed JSON is a 400
// too.
func BindOrderIDs(c echo.Context) ([]string, error) {
	var req OrderIDsRequest
	if err := httpapi.Bind(c, &req); err != nil {
		return nil, err
	}
	if n := len(req.OrderIDs); n < 1 || n > MaxOrderIDs {
		return nil, rules.Invalid("orderIds", "must hold 1 to %d order ids, got %d", MaxOrderIDs, n)
	}
	for i, id := range req.OrderIDs {
		if err := rules.ValidateID(fmt.Sprintf("orderIds[%d]", i), id); err != nil {
			return nil, err
		}
	}
	return req.OrderIDs, nil
}

// ReconciliationViews answers POST /admin/reconciliation/orders: one view
// per requested id, in the request's order.
type ReconciliationViews[V any] struct {
	Orders []V `json:"orders"`
}

// RecordsFunc reads what a service holds of orderIDs through q, with one
// statement or a few whatever their number.
type RecordsFunc[R any] func(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (R, error)

// ViewFunc builds the view of one order from the service's records of the
// requested orders and the consumer's facts of that order.
type ViewFunc[R, V any] func(orderID string, records R, facts ConsumerFacts) V

// RegisterReconciliation adds POST /reconciliation/orders to a consumer
// service's admin group: the views of up to MaxOrderIDs orders, the
// service's records (read) and the consumer's facts read in one snapshot,
// so a view never pairs the consumer's version with its tables as they
// were at another moment.
func RegisterReconciliation[R, V any](g *echo.Group, facts *FactsReader, read RecordsFunc[R], view ViewFunc[R, V]) {
	g.POST("/reconciliation/orders", func(c echo.Context) error {
		ids, err := BindOrderIDs(c)
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		var recs R
		fs, err := facts.Read(ctx, ids, func(q sqlx.QueryerContext) error {
			var err error
			recs, err = read(ctx, q, ids)
			return err
		})
		if err != nil {
			return err
		}
		out := ReconciliationViews[V]{Orders: make([]V, len(ids))}
		for i, id := range ids {
			out.Orders[i] = view(id, recs, fs[id])
		}
		return c.JSON(http.StatusOK, out)
	})
}

// ConsumerFacts is what every consumer's reconciliation view says of an
// order besides its own tables: how far the version guard has applied it,
// and the dead letters of it still waiting for a replay. A service embeds
// it in its view, so the fields are consumer and deadLetters everywhere.
type ConsumerFacts struct {
	Consumer    versionguard.Position `json:"consumer"`
	DeadLetters []dlq.Outstanding     `json:"deadLetters"`
}

// FactsReader reads the ConsumerFacts of one consumer from its database.
type FactsReader struct {
	db       *sqlx.DB
	consumer string
}

// NewFactsReader returns a reader of consumer's facts (its consumer group,
// the name its version guard and dead letters are recorded under).
func NewFactsReader(db *sqlx.DB, consumer string) *FactsReader {
	return &FactsReader{db: db, consumer: consumer}
}

// Read returns the facts of every one of orderIDs (an order never seen is
// version 0, NONE, no dead letters) with two statements whatever their
// number. own reads the service's part of the views through q, in the same
// read-only snapshot, so a view never pairs the consumer's version with
// its tables as they were at another moment; own may be nil.
func (r *FactsReader) Read(ctx context.Context, orderIDs []string, own func(q sqlx.QueryerContext) error) (map[string]ConsumerFacts, error) {
	out := make(map[string]ConsumerFacts, len(orderIDs))
	err := postgres.InSnapshot(ctx, r.db, func(tx *sqlx.Tx) error {
		if own != nil {
			if err := own(tx); err != nil {
				return err
			}
		}
		states, err := versionguard.States(ctx, tx, r.consumer, orderIDs)
		if err != nil {
			return err
		}
		dead, err := dlq.FindOutstanding(ctx, tx, r.consumer, orderIDs)
		if err != nil {
			return err
		}
		for _, id := range orderIDs {
			letters := dead[id]
			if letters == nil {
				letters = []dlq.Outstanding{}
			}
			out[id] = ConsumerFacts{Consumer: states[id], DeadLetters: letters}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
