// Package notificationapi is the notification service's HTTP contract:
// the answers its routes give. The handlers answer these types, the
// service's OpenAPI document is reflected from them, and the service's
// clients (reconciliation, the console, scripts/suiteapi, the tests)
// decode with them (docs/decisions.md, The HTTP contract is generated
// from the handlers' types). It imports the kit only, never the service's
// internal packages.
package notificationapi

import (
	"time"

	"github.com/reliable-orders/fulfillment/pkg/admin"
)

// Item is one notification in ListResponse.
type Item struct {
	EventID   string    `json:"eventId"`
	Kind      string    `json:"kind"`
	Channel   string    `json:"channel"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"createdAt"`
}

// ListResponse answers GET /notifications?orderId=: the notifications
// sent for the order, oldest first.
type ListResponse struct {
	OrderID string `json:"orderId"`
	Count   int    `json:"count"`
	Items   []Item `json:"items"`
}

// ReconciledNotification is one notification in a ReconciliationView:
// which event it told the customer of, and when.
type ReconciledNotification struct {
	EventID   string    `json:"eventId"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"createdAt"`
}

// ReconciliationView is the notification service's view of one order for
// the reconciliation service (POST /admin/reconciliation/orders): the
// notifications sent, oldest first, and the consumer's facts.
type ReconciliationView struct {
	OrderID       string                   `json:"orderId"`
	Notifications []ReconciledNotification `json:"notifications"`
	admin.ConsumerFacts
}
