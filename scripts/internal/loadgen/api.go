package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/sync/errgroup"
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
	cfg    Config
	client *http.Client
}

func newAPIPublisher(cfg Config) *apiPublisher {
	return &apiPublisher{cfg: cfg, client: newHTTPClient(cfg.Concurrency)}
}

func newHTTPClient(concurrency int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = concurrency
	return &http.Client{Timeout: httpTimeout, Transport: tr}
}

func (p *apiPublisher) close() { p.client.CloseIdleConnections() }

// apiAnswer is the part of the order and payment answers the walk reads.
type apiAnswer struct {
	BusinessCode string `json:"businessCode"`
	Status       string `json:"status"`
	Message      string `json:"message"`
}

type orderItem struct {
	SKU       string `json:"sku"`
	Quantity  int    `json:"quantity"`
	UnitPrice string `json:"unitPrice"`
}

type createOrder struct {
	OrderID    string      `json:"orderId"`
	CustomerID string      `json:"customerId"`
	Currency   string      `json:"currency"`
	Items      []orderItem `json:"items"`
}

type payOrder struct {
	OrderID  string `json:"orderId"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

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
	created, err := p.call(ctx, http.MethodPost, p.cfg.OrderURL+"/orders", createOrder{
		OrderID: id, CustomerID: CustomerID(p.cfg.RunID, i), Currency: Currency,
		Items: []orderItem{{SKU: SKUFor(p.cfg.RunID, i, p.cfg.SKUs), Quantity: 1, UnitPrice: UnitPrice}},
	})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	status := created.Status
	if status == statusCreated {
		checked, err := p.call(ctx, http.MethodPost, p.cfg.OrderURL+"/orders/"+url.PathEscape(id)+"/checkout", nil)
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
	if _, err := p.call(ctx, http.MethodPost, p.cfg.PaymentURL+"/payments",
		payOrder{OrderID: id, Amount: UnitPrice, Currency: Currency}); err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	return nil
}

// call sends body as JSON and wants 200 with businessCode SUCCESS.
func (p *apiPublisher) call(ctx context.Context, method, target string, body any) (apiAnswer, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return apiAnswer{}, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(raw)
	}
	return doJSON(ctx, p.client, method, target, rd)
}

// doJSON sends one request and decodes the answer, which must be 200 with
// businessCode SUCCESS (or none).
func doJSON(ctx context.Context, client *http.Client, method, target string, body io.Reader) (apiAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return apiAnswer{}, fmt.Errorf("%s %s: %w", method, target, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return apiAnswer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return apiAnswer{}, fmt.Errorf("%s %s: read the answer: %w", method, target, err)
	}
	var a apiAnswer
	_ = json.Unmarshal(raw, &a) // a non-JSON answer is reported by its status below
	if resp.StatusCode != http.StatusOK || (a.BusinessCode != "" && a.BusinessCode != "SUCCESS") {
		return a, fmt.Errorf("%s %s: %d %s", method, target, resp.StatusCode, bytes.TrimSpace(raw))
	}
	return a, nil
}

// seedStock sets the available stock of every SKU of the run, a few at a
// time, and returns how many it set.
func seedStock(ctx context.Context, cfg Config) (int, error) {
	client := newHTTPClient(cfg.Concurrency)
	defer client.CloseIdleConnections()
	body, err := json.Marshal(map[string]int{"available": cfg.SeedStock})
	if err != nil {
		return 0, fmt.Errorf("encode stock: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Concurrency)
	for k := 1; k <= cfg.SKUs; k++ {
		target := cfg.InventoryURL + "/inventory/" + url.PathEscape(SKU(cfg.RunID, k))
		g.Go(func() error {
			if _, err := doJSON(gctx, client, http.MethodPut, target, bytes.NewReader(body)); err != nil {
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
