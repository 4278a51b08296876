package devrun

import (
	"fmt"
	"io"
	"strings"

	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// The request bodies and the expected snapshot of the walk-through
// (README.md, Walk-through: one order, paid, consumed by everyone).
const (
	// StockBody is PUT /inventory/SKU-1.
	StockBody = `{"available":100}`
	// OrderBody is POST /orders.
	OrderBody = `{"orderId":"O-1001","customerId":"C-1","currency":"CNY","items":[{"sku":"SKU-1","quantity":2,"unitPrice":"40.00"}]}`
	// PaymentBody is POST /payments.
	PaymentBody = `{"orderId":"O-1001","amount":"80.00","currency":"CNY"}`
	// WantSnapshot is GET /orders/O-1001/snapshot once the chain has run.
	WantSnapshot = `{"order":"PAID","orderVersion":3,"payment":"SUCCEEDED","inventory":"DEDUCTED","pointsLedger":1,"notifications":1,"dlq":0,"converged":true,"findings":0}`
)

// Walkthrough writes the services' URLs and, when the order, payment and
// inventory services are among them, a curl session that takes one order
// through the chain, then the kcat command that shows its events, and where
// the console shows the order's journey. brokers is the KAFKA_BROKERS the
// services were given; consoleURL is empty without a console.
func Walkthrough(w io.Writer, services []suite.Service, brokers, consoleURL string) {
	var b strings.Builder
	b.WriteString("\nThe suite is ready:\n")
	for _, s := range services {
		fmt.Fprintf(&b, "  %-22s %s\n", s.FullName(), s.LocalURL())
	}
	if consoleURL != "" {
		fmt.Fprintf(&b, "  %-22s %s\n", suite.ConsoleName, consoleURL)
	}
	fmt.Fprintf(&b, "  %-22s %s\n", "kafka", brokers)

	order, okOrder := suite.Lookup(services, "order")
	payment, okPayment := suite.Lookup(services, "payment")
	inventory, okInventory := suite.Lookup(services, "inventory")
	if okOrder && okPayment && okInventory {
		const jsonHeader = ` -H 'Content-Type: application/json'`
		o := order.LocalURL()
		b.WriteString("\nTake one order through the chain (paste into another terminal):\n\n")
		fmt.Fprintf(&b, "  curl -sS -X PUT %s/inventory/SKU-1%s -d '%s'\n", inventory.LocalURL(), jsonHeader, StockBody)
		fmt.Fprintf(&b, "  curl -sS -X POST %s/orders%s -d '%s'\n", o, jsonHeader, OrderBody)
		fmt.Fprintf(&b, "  curl -sS -X POST %s/orders/O-1001/checkout\n", o)
		fmt.Fprintf(&b, "  curl -sS -X POST %s/payments%s -d '%s'\n", payment.LocalURL(), jsonHeader, PaymentBody)
		fmt.Fprintf(&b, "  curl -sS %s/orders/O-1001/snapshot\n", o)
		fmt.Fprintf(&b, "  # once the consumers have caught up (a moment), the snapshot reads\n  # %s\n", WantSnapshot)
		if consoleURL != "" {
			fmt.Fprintf(&b, "\nIts journey across every service, on one time axis:\n\n  %s/orders/O-1001\n", consoleURL)
		}
	}
	first, _, _ := strings.Cut(brokers, ",")
	fmt.Fprintf(&b, "\nThe events on the wire:\n\n  kcat -C -b %s -t %s -e\n", first, suite.OrderEventsTopic)
	b.WriteString("\nCtrl-C stops everything.\n\n")
	_, _ = io.WriteString(w, b.String())
}
