package ports

import (
	"net/http"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/services/inventory/inventoryapi"
)

// Operations describe the routes of Register and RegisterReconciliation
// for the service's OpenAPI document (pkg/apispec).
func Operations() []apispec.Operation {
	return append([]apispec.Operation{
		{Method: http.MethodGet, Path: "/inventory/orders/:orderId", Summary: "What the inventory did for an order.", Answer: inventoryapi.OrderResponse{}},
		{Method: http.MethodGet, Path: "/inventory/orders/:orderId/movements", Summary: "The stock movements of an order.", Answer: inventoryapi.MovementsResponse{}},
		{Method: http.MethodGet, Path: "/inventory/:sku", Summary: "The stock of a SKU.", Answer: inventoryapi.StockResponse{}},
		{Method: http.MethodPut, Path: "/inventory/:sku", Summary: "Set the stock of a SKU.", Body: inventoryapi.SetStockRequest{}, Answer: inventoryapi.StockResponse{}},
	}, admin.ReconciliationOperations[inventoryapi.ReconciliationView]()...)
}
