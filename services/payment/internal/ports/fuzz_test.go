package ports_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/testkit/httpapitest"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
	"github.com/reliable-orders/fulfillment/services/payment/internal/app"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
	"github.com/reliable-orders/fulfillment/services/payment/internal/ports"
)

const fuzzAdminToken = "fuzz-admin-token"

// memOrders knows O-1 (PENDING_PAYMENT, 80.00 CNY) and O-CANCELLED.
type memOrders struct{}

func (memOrders) Order(_ context.Context, id string) (payment.Order, error) {
	switch id {
	case "O-1":
		return payment.Order{ID: id, Status: payment.OrderStatusPendingPayment, Version: 2,
			Amount: decimal.RequireFromString("80.00"), Currency: "CNY"}, nil
	case "O-CANCELLED":
		return payment.Order{ID: id, Status: "CANCELLED", Version: 2, Amount: decimal.RequireFromString("80.00"), Currency: "CNY"}, nil
	case "O-PAID":
		return payment.Order{ID: id, Status: "PAID", Version: 3, Amount: decimal.RequireFromString("80.00"), Currency: "CNY",
			PaymentID: "P-1"}, nil
	}
	return payment.Order{}, fmt.Errorf("%w: %s", payment.ErrOrderNotFound, id)
}

// RequestRefund records an operator's refund of O-PAID as the order
// service answers it.
func (memOrders) RequestRefund(_ context.Context, _ string, r app.OperatorRefund) (orderapi.Result, error) {
	return orderapi.Result{BusinessCode: "SUCCESS", Status: "REFUNDING", Version: 4, RefundID: r.RefundID}, nil
}

// memPayments holds O-PAID's payment of 80.00 CNY.
type memPayments struct{ byOrder map[string]payment.Payment }

func (m *memPayments) ByOrder(_ context.Context, orderID string) (payment.Payment, error) {
	p, ok := m.byOrder[orderID]
	if !ok {
		return payment.Payment{}, fmt.Errorf("%w: %s", payment.ErrPaymentNotFound, orderID)
	}
	return p, nil
}

func (m *memPayments) Create(_ context.Context, p payment.Payment, _ int64) (payment.Payment, bool, error) {
	if existing, ok := m.byOrder[p.OrderID]; ok {
		return existing, false, nil
	}
	m.byOrder[p.OrderID] = p
	return p, true, nil
}

// memRefunds refunds what is left of O-PAID's payment, as the repository
// does, and rejects the rest.
type memRefunds struct{ payments *memPayments }

func (m memRefunds) ByOrder(_ context.Context, orderID string) (payment.Payment, error) {
	p, ok := m.payments.byOrder[orderID]
	if !ok {
		return payment.Payment{}, payment.ErrPaymentNotFound
	}
	return p, nil
}

func (m memRefunds) RefundPayment(_ context.Context, req payment.RefundRequest) (app.RefundOutcome, error) {
	p, ok := m.payments.byOrder[req.OrderID]
	if !ok {
		return app.RefundOutcome{Status: "REJECTED", Reason: payment.ReasonNoPayment}, nil
	}
	if err := p.Refund(req.Amount, p.Currency); err != nil {
		return app.RefundOutcome{Status: "REJECTED", Reason: err.Error()}, nil
	}
	m.payments.byOrder[req.OrderID] = p
	return app.RefundOutcome{Status: "SUCCEEDED"}, nil
}

func fuzzServer() http.Handler {
	payments := &memPayments{byOrder: map[string]payment.Payment{"O-PAID": {ID: "P-1", OrderID: "O-PAID",
		Amount: decimal.RequireFromString("80.00"), Currency: "CNY", Status: payment.StatusSucceeded, Refunded: decimal.Zero}}}
	srv := httpapi.New(httpapi.Config{AdminToken: fuzzAdminToken, MapError: ports.MapError}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ports.NewHandler(memOrders{}, payments).Register(srv.Echo)
	ports.RegisterRefunds(srv.Admin(), memRefunds{payments: payments}, memOrders{})
	return srv.Echo
}

// FuzzRequests sends any body to POST /payments and to the operator's
// refund, with any order id in the refund's path: the answer is always a
// 2xx with a businessCode or a 4xx with a JSON businessCode, never a 5xx
// or a panic.
func FuzzRequests(f *testing.F) {
	f.Add(false, "", []byte(`{"orderId":"O-1","amount":"80.00","currency":"CNY"}`))
	f.Add(false, "", []byte(`{"orderId":"O-PAID","amount":"80.00","currency":"CNY"}`))
	f.Add(false, "", []byte(`{"orderId":"O-CANCELLED","amount":"80.00","currency":"CNY"}`))
	f.Add(false, "", []byte(`{"orderId":"O-1","amount":80,"currency":"CNY"}`))
	f.Add(false, "", []byte(`{"orderId":"O-1","amount":"9999999999999999.999","currency":"cny"}`))
	f.Add(false, "", []byte(`{"orderId":"","amount":null}`))
	f.Add(true, "O-PAID", []byte(`{"refundId":"R-1","amount":"10.00","reason":"RECONCILIATION"}`))
	f.Add(true, "O-PAID", []byte(`{"refundId":"R-1","amount":"80.01","reason":""}`))
	f.Add(true, "O-NONE", []byte(`{"refundId":"R-2","amount":"1"}`))
	f.Add(true, "O 1", []byte(`{"refundId":"R 2","amount":"-1"}`))
	f.Add(true, "O-PAID", []byte(`{"refundId":"R-3","amount":"1.00","reason":"a\u0000b"}`))
	f.Add(true, "O-PAID", []byte(`{"refundId":"R-4","amount":"1.00","reason":"two\nlines\t\u007f\u0085\u009f"}`))
	f.Fuzz(func(t *testing.T, refund bool, orderID string, body []byte) {
		target, header := "/payments", map[string]string{}
		if refund {
			target = "/admin/payments/orders/" + url.PathEscape(orderID) + "/refunds"
			header["Authorization"] = "Bearer " + fuzzAdminToken
			header["X-Operator"] = "fuzz"
		}
		httpapitest.CheckAnswer(t, httpapitest.Do(fuzzServer(), http.MethodPost, target, body, header), true)
	})
}
