package adapters

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// maxBody bounds how much of an answer is read.
const maxBody = 1 << 20

// orderServiceTimeout bounds one callback to the order service.
const orderServiceTimeout = 5 * time.Second

// orderLookupTimeout bounds one order look-up, shorter than a callback: a
// payment's client is waiting, the look-up is one indexed read, and an
// overloaded order service answers 503 at once instead of queueing, so a
// look-up this slow means the order service is stuck, and waiting longer
// would only hold the payment's admission slot (docs/decisions.md,
// Overload).
const orderLookupTimeout = time.Second

// OrderService is how the payment service reaches the order service, over
// one HTTP transport: the look-up of an order before a payment is accepted,
// and the signed callbacks the outbox relay delivers.
type OrderService struct {
	Orders    *OrderClient
	Callbacks *outbox.HTTPSink
}

// NewOrderService returns the order service at baseURL (ORDER_URL), whose
// callbacks are signed with secret (CALLBACK_SECRET).
func NewOrderService(baseURL string, secret []byte) OrderService {
	// Keep enough idle connections for the callbacks in flight (Go's
	// default keeps two).
	client := &http.Client{Timeout: orderServiceTimeout, Transport: httpapi.ClientTransport(2 * outbox.DefaultHTTPSinkParallel)}
	return OrderService{
		Orders:    NewOrderClient(client, baseURL),
		Callbacks: outbox.NewHTTPSink(client, strings.TrimRight(baseURL, "/")+CallbackPath, secret),
	}
}

// OrderClient looks orders up in the order service (GET
// {ORDER_URL}/orders/{id}), which the payment service must do before it
// accepts a payment.
type OrderClient struct {
	http    *http.Client
	baseURL string
}

// NewOrderClient returns a client for the order service at baseURL (ORDER_URL).
func NewOrderClient(client *http.Client, baseURL string) *OrderClient {
	return &OrderClient{http: client, baseURL: strings.TrimRight(baseURL, "/")}
}

// orderView is the part of GET /orders/{id} the payment service needs.
type orderView struct {
	OrderID  string `json:"orderId"`
	Status   string `json:"status"`
	Version  int64  `json:"version"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// Order returns the order orderID, or an error wrapping
// payment.ErrOrderNotFound when the order service does not know it.
func (c *OrderClient) Order(ctx context.Context, orderID string) (payment.Order, error) {
	ctx, cancel := context.WithTimeout(ctx, orderLookupTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/orders/"+url.PathEscape(orderID), nil)
	if err != nil {
		return payment.Order{}, fmt.Errorf("order look-up request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return payment.Order{}, fmt.Errorf("look up order %s: %w", orderID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return payment.Order{}, fmt.Errorf("look up order %s: read answer: %w", orderID, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return payment.Order{}, fmt.Errorf("%w: %s", payment.ErrOrderNotFound, orderID)
	case resp.StatusCode != http.StatusOK:
		return payment.Order{}, fmt.Errorf("look up order %s: order service answered %s", orderID, resp.Status)
	}
	var v orderView
	if err := json.Unmarshal(body, &v); err != nil {
		return payment.Order{}, fmt.Errorf("look up order %s: decode answer: %w", orderID, err)
	}
	amount, err := decimal.NewFromString(v.Amount)
	if err != nil {
		return payment.Order{}, fmt.Errorf("look up order %s: amount %q: %w", orderID, v.Amount, err)
	}
	return payment.Order{ID: v.OrderID, Status: v.Status, Version: v.Version, Amount: amount, Currency: v.Currency}, nil
}
