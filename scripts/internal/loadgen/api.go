package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// httpTimeout bounds one call to a service.
const httpTimeout = 10 * time.Second

// The order statuses the API walk looks at (docs/design.md, Order lifecycle).
const (
	statusCreated        = "CREATED"
	statusPendingPayment = "PENDING_PAYMENT"
	statusPaid           = "PAID"
)

// apiPublisher takes each order through create → checkout → pay over
// HTTP; the OrderPaid event then leaves through the order service's outbox
// once the payment's callback arrives.
type apiPublisher struct {
	cfg Config
	api *suiteapi.Client
}

// newClient is the suite's API client, keeping a connection per call in
// flight.
func newClient(cfg Config) *suiteapi.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = cfg.Concurrency
	return suiteapi.New(suiteapi.Config{
		URLs: map[string]string{
			suiteapi.Order:     cfg.OrderURL,
			suiteapi.Payment:   cfg.PaymentURL,
			suiteapi.Inventory: cfg.InventoryURL,
		},
		HTTPClient: &http.Client{Timeout: httpTimeout, Transport: tr},
	})
}

func (p *apiPublisher) close() { p.api.Close() }

// publish walks orders first … last; a re-run of the same run id finds the
// orders already paid and only confirms them.
func (p *apiPublisher) publish(ctx context.Context, first, last int, fail func(int, error)) error {
	for i := first; i <= last; i++ {
		if err := p.walk(ctx, i); err != nil && ctx.Err() == nil {
			fail(i, err)
		}
	}
	return nil
}

func (p *apiPublisher) walk(ctx context.Context, i int) error {
	id := OrderID(p.cfg.RunID, i)
	created, err := success(p.api.CreateOrder(ctx, suiteapi.NewOrder{
		OrderID: id, CustomerID: CustomerID(p.cfg.RunID, i), Currency: Currency,
		Items: []suiteapi.Item{{SKU: SKUFor(p.cfg.RunID, i, p.cfg.SKUs), Quantity: 1, UnitPrice: UnitPrice}},
	}))
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	status := created.Status
	if status == statusCreated {
		checked, err := success(p.api.Checkout(ctx, id))
		if err != nil {
			return fmt.Errorf("checkout: %w", err)
		}
		status = checked.Status
	}
	switch status {
	case statusPaid:
		return nil // paid by an earlier run with this run id
	case statusPendingPayment:
	default:
		return fmt.Errorf("order %s is %s, cannot pay it", id, status)
	}
	if _, err := success(p.api.Pay(ctx, suiteapi.PaymentRequest{OrderID: id, Amount: UnitPrice, Currency: Currency})); err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	return nil
}

// success turns an accepted answer whose businessCode is not SUCCESS into
// an error.
func success(res suiteapi.CommandResult, err error) (suiteapi.CommandResult, error) {
	if err == nil && res.BusinessCode != suiteapi.Success {
		err = fmt.Errorf("businessCode %s: %s", res.BusinessCode, res.Message)
	}
	return res, err
}

// seedStock sets the available stock of every SKU of the run, a few at a
// time, and returns how many it set.
func seedStock(ctx context.Context, cfg Config) (int, error) {
	api := newClient(cfg)
	defer api.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Concurrency)
	for k := 1; k <= cfg.SKUs; k++ {
		g.Go(func() error {
			if err := api.SetStock(gctx, SKU(cfg.RunID, k), cfg.SeedStock); err != nil {
				return fmt.Errorf("seed stock: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return cfg.SKUs, nil
}
