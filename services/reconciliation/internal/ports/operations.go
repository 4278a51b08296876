package ports

import (
	"net/http"

	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/services/reconciliation/reconciliationapi"
)

// Operations describe the routes of Register for the service's OpenAPI
// document (pkg/apispec).
func Operations() []apispec.Operation {
	return []apispec.Operation{
		{Method: http.MethodPost, Path: "/admin/reconciliation/runs", Summary: "Start a run; it goes on after the answer.",
			Body: reconciliationapi.RunRequest{}, OptionalBody: true, Answer: reconciliationapi.RunView{}, Status: http.StatusAccepted},
		{Method: http.MethodGet, Path: "/admin/reconciliation/runs", Summary: "The latest runs.", Query: []string{"limit"}, Answer: reconciliationapi.RunsView{}},
		{Method: http.MethodGet, Path: "/admin/reconciliation/runs/:id", Summary: "A run and its findings.", Answer: reconciliationapi.RunView{}},
		{Method: http.MethodGet, Path: "/admin/reconciliation/findings", Summary: "The findings of an order.", Query: []string{"orderId"}, Answer: reconciliationapi.FindingsView{}},
		{Method: http.MethodGet, Path: "/admin/reconciliation/orders/:id", Summary: "Check one order now, recording nothing.", Answer: reconciliationapi.CheckView{}},
	}
}
