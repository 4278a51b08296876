package ports

import (
	"net/http"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/services/points/pointsapi"
)

// Operations describe the routes of Register and RegisterReconciliation
// for the service's OpenAPI document (pkg/apispec).
func Operations() []apispec.Operation {
	return append([]apispec.Operation{
		{Method: http.MethodGet, Path: "/points/orders/:orderId", Summary: "The ledger entries of an order.", Answer: pointsapi.OrderResponse{}},
		{Method: http.MethodGet, Path: "/points/customers/:customerId", Summary: "A customer's points balance.", Answer: pointsapi.BalanceResponse{}},
	}, admin.ReconciliationOperations[pointsapi.ReconciliationView]()...)
}
