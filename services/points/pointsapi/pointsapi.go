// Package pointsapi is the points service's HTTP contract: the answers
// its routes give. The handlers answer these types, the service's OpenAPI
// document is reflected from them, and the service's clients
// (reconciliation, the console, scripts/suiteapi, the tests) decode with
// them (docs/decisions.md, The HTTP contract is generated from the
// handlers' types). It imports the kit only, never the service's internal
// packages.
package pointsapi

import (
	"time"

	"github.com/reliable-orders/fulfillment/pkg/admin"
)

// Entry is one ledger entry of an order. Amount is the money it was
// earned or reversed for, a decimal string with two places.
type Entry struct {
	EventID   string    `json:"eventId"`
	Type      string    `json:"type"`
	Points    int64     `json:"points"`
	Amount    string    `json:"amount"`
	CreatedAt time.Time `json:"createdAt"`
}

// OrderResponse answers GET /points/orders/{orderId}. Status names where
// the order stands (EARNED, PARTIALLY_REVERSED, REVERSED), which the
// entries alone leave to arithmetic.
type OrderResponse struct {
	OrderID string  `json:"orderId"`
	Status  string  `json:"status"`
	Count   int     `json:"count"`
	Entries []Entry `json:"entries"`
}

// BalanceResponse answers GET /points/customers/{customerId}.
type BalanceResponse struct {
	CustomerID string `json:"customerId"`
	Balance    int64  `json:"balance"`
}

// ReconciliationView is the points service's view of one order for the
// reconciliation service (POST /admin/reconciliation/orders): its ledger
// entries, in the order they were applied (their points add up to what
// the order is worth, rules.PointsFor), and the consumer's facts.
type ReconciliationView struct {
	OrderID string  `json:"orderId"`
	Entries []Entry `json:"entries"`
	admin.ConsumerFacts
}
