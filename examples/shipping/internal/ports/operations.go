package ports

import (
	"net/http"

	"github.com/reliable-orders/fulfillment/pkg/apispec"
)

// Operations describe the routes of Register for the service's OpenAPI
// document (pkg/apispec).
func Operations() []apispec.Operation {
	return []apispec.Operation{{Method: http.MethodGet, Path: "/shipments/:orderId", Summary: "An order's shipment and its history.",
		Answer: ShipmentResponse{}}}
}
