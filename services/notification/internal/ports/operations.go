package ports

import (
	"net/http"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/services/notification/notificationapi"
)

// Operations describe the routes of Register and RegisterReconciliation
// for the service's OpenAPI document (pkg/apispec).
func Operations() []apispec.Operation {
	return append([]apispec.Operation{
		{Method: http.MethodGet, Path: "/notifications", Summary: "The notifications sent for an order (orderId required).",
			Query: []string{"orderId"}, Answer: notificationapi.ListResponse{}},
	}, admin.ReconciliationOperations[notificationapi.ReconciliationView]()...)
}
