package ports

import (
	"net/http"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
)

// Operations describe the routes of Register for the service's OpenAPI
// document (pkg/apispec).
func Operations() []apispec.Operation {
	ops := []apispec.Operation{
		{Method: http.MethodPost, Path: "/orders", Summary: "Create an order (Idempotency-Key accepted).", Body: orderapi.CreateRequest{}, Answer: orderapi.Result{}},
		{Method: http.MethodGet, Path: "/orders/:id", Summary: "An order, its items and refunds.", Answer: orderapi.OrderView{}},
		{Method: http.MethodPost, Path: "/orders/:id/checkout", Summary: "Check an order out: it awaits payment.", Answer: orderapi.Result{}},
		{Method: http.MethodPost, Path: "/orders/:id/refunds", Summary: "Ask for a refund of an amount or of goods.", Body: orderapi.RefundRequest{}, Answer: orderapi.Result{}},
		{Method: http.MethodPost, Path: "/orders/:id/cancel", Summary: "Cancel an order that is not paid.", Body: orderapi.CancelRequest{}, OptionalBody: true, Answer: orderapi.Result{}},
		{Method: http.MethodGet, Path: "/orders/:id/snapshot", Summary: "What every service knows of the order.", Answer: orderapi.Snapshot{}},
		{Method: http.MethodGet, Path: "/orders/:id/events", Summary: "The order's outbox rows.", Answer: orderapi.EventsView{}},
		{Method: http.MethodPost, Path: "/admin/orders/:id/refunds", Summary: "An operator's refund (X-Operator required).", Body: orderapi.OperatorRefundRequest{}, Answer: orderapi.Result{}},
		{Method: http.MethodPost, Path: "/admin/orders/:id/version", Summary: "Fence the order's version (X-Operator required).", Body: orderapi.FenceRequest{}, Answer: orderapi.FenceAnswer{}},
		{Method: http.MethodPost, Path: "/admin/reconciliation/orders", Summary: "The order service's views of orders, for reconciliation.", Body: admin.OrderIDsRequest{}, Answer: orderapi.ReconciliationViews{}},
		{Method: http.MethodGet, Path: "/admin/reconciliation/orders", Summary: "A page of the orders changed in a window.",
			Query: []string{"changedAfter", "changedBefore", "afterId", "limit"}, Answer: orderapi.ChangedViews{}},
		{Method: http.MethodPost, Path: "/admin/reconciliation/unknown-orders", Summary: "Which of the orders the service does not know, for reconciliation.",
			Body: admin.OrderIDsRequest{}, Answer: orderapi.UnknownOrders{}},
	}
	for _, path := range []string{CallbackPath, StockCallbackPath} {
		ops = append(ops, apispec.Operation{Method: http.MethodPost, Path: path,
			Summary: "A signed callback (X-Signature, X-Signature-Timestamp).", Body: orderapi.CallbackRequest{}, Answer: orderapi.Result{}})
	}
	return ops
}
