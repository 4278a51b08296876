package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
	"github.com/reliable-orders/fulfillment/services/payment/internal/app"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// maxBody bounds how much of an answer is read.
const maxBody = 1 << 20

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

// NewOrderService returns the order service cfg names, whose callbacks
// are signed with cfg's callback secret and whose admin routes take
// adminToken (ADMIN_TOKEN).
func NewOrderService(cfg service.CallbackSenderConfig, adminToken string) OrderService {
	// The look-ups share the callbacks' connections: room for both.
	client := cfg.Client(2 * outbox.DefaultHTTPSinkParallel)
	return OrderService{Orders: NewOrderClient(client, cfg.OrderURL, adminToken), Callbacks: cfg.Sink(client, CallbackPath)}
}

// OrderClient looks orders up in the order service (GET
// {ORDER_URL}/orders/{id}), which the payment service must do before it
// accepts a payment.
type OrderClient struct {
	http       *http.Client
	baseURL    string
	adminToken string
}

// NewOrderClient returns a client for the order service at baseURL
// (ORDER_URL); adminToken (ADMIN_TOKEN, empty in development) opens its
// admin routes.
func NewOrderClient(client *http.Client, baseURL, adminToken string) *OrderClient {
	return &OrderClient{http: client, baseURL: strings.TrimRight(baseURL, "/"), adminToken: adminToken}
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
	var v orderapi.OrderView
	if err := json.Unmarshal(body, &v); err != nil {
		return payment.Order{}, fmt.Errorf("look up order %s: decode answer: %w", orderID, err)
	}
	return payment.Order{ID: v.OrderID, Status: v.Status, Version: v.Version, Amount: v.Amount.Decimal, Currency: v.Currency,
		PaymentID: v.PaymentID}, nil
}

// operatorRefundBody is the body of POST /admin/orders/{id}/refunds
// (orderapi.OperatorRefundRequest) with its items left as the operator
// sent them: the order service decodes and judges them.
type operatorRefundBody struct {
	RefundID string          `json:"refundId,omitempty"`
	Amount   *string         `json:"amount,omitempty"`
	Items    json.RawMessage `json:"items,omitempty"`
	Reason   string          `json:"reason"`
}

// RequestRefund asks the order service to record r on order orderID, with
// the admin token, so the order, not the payment service alone, keeps the
// books of every refund of the money it holds. A 400 is returned as an
// *httpapi.Error carrying the order service's businessCode and message.
// The client's timeout bounds the call.
func (c *OrderClient) RequestRefund(ctx context.Context, orderID string, r app.OperatorRefund) (orderapi.Result, error) {
	body, err := json.Marshal(operatorRefundBody{RefundID: r.RefundID, Amount: r.Amount, Items: r.Items, Reason: r.Reason})
	if err != nil {
		return orderapi.Result{}, fmt.Errorf("encode refund of order %s: %w", orderID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/admin/orders/"+url.PathEscape(orderID)+"/refunds", bytes.NewReader(body))
	if err != nil {
		return orderapi.Result{}, fmt.Errorf("refund request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(admin.OperatorHeader, r.Operator)
	if c.adminToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.adminToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return orderapi.Result{}, fmt.Errorf("refund of order %s at the order service: %w", orderID, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return orderapi.Result{}, fmt.Errorf("refund of order %s: read answer: %w", orderID, err)
	}
	if resp.StatusCode == http.StatusBadRequest {
		var e httpapi.ErrorBody
		if json.Unmarshal(raw, &e) == nil && e.BusinessCode != "" {
			return orderapi.Result{}, &httpapi.Error{Status: http.StatusBadRequest, BusinessCode: e.BusinessCode, Message: e.Message}
		}
	}
	if resp.StatusCode != http.StatusOK {
		return orderapi.Result{}, fmt.Errorf("refund of order %s: order service answered %s: %s", orderID, resp.Status, bytes.TrimSpace(raw))
	}
	var a orderapi.Result
	if err := json.Unmarshal(raw, &a); err != nil {
		return orderapi.Result{}, fmt.Errorf("refund of order %s: decode answer: %w", orderID, err)
	}
	return a, nil
}
