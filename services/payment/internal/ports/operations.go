package ports

import (
	"net/http"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/services/payment/paymentapi"
)

// Operations describe the routes of Register, RegisterReconciliation and
// RegisterRefunds for the service's OpenAPI document (pkg/apispec).
func Operations() []apispec.Operation {
	return append([]apispec.Operation{
		{Method: http.MethodPost, Path: "/payments", Summary: "Pay an order awaiting payment (Idempotency-Key accepted).", Body: paymentapi.PayRequest{}, Answer: paymentapi.PayResponse{}},
		{Method: http.MethodGet, Path: "/payments/orders/:orderId", Summary: "The payment of an order and its refunds.", Answer: paymentapi.PaymentView{}},
		{Method: http.MethodPost, Path: "/admin/payments/orders/:orderId/refunds", Summary: "An operator's refund, recorded by the order (X-Operator required).",
			Body: paymentapi.RefundBody{}, Answer: paymentapi.RefundResponse{}},
	}, admin.ReconciliationOperations[paymentapi.ReconciliationView]()...)
}
