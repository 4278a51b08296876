package harness

import (
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// OrderEvents builds the events of one order as the order service would
// emit them, for tests that publish straight to the broker.
type OrderEvents struct {
	t        testing.TB
	OrderID  string
	Customer string
	SKU      string
	Quantity int
	Amount   string
}

// Events returns a builder for orderID buying quantity of sku for amount.
func (s *Suite) Events(orderID, sku string, quantity int, amount string) OrderEvents {
	return OrderEvents{t: s.t, OrderID: orderID, Customer: "C-1", SKU: sku, Quantity: quantity, Amount: amount}
}

func (o OrderEvents) money() event.Money {
	m, err := event.ParseMoney(o.Amount)
	if err != nil {
		o.t.Fatal(err)
	}
	return m
}

func (o OrderEvents) build(t event.Type, version int64, data any) event.Envelope {
	o.t.Helper()
	env, err := event.New(t, event.Meta{AggregateID: o.OrderID, AggregateVersion: version, Producer: "test-harness"}, data)
	if err != nil {
		o.t.Fatal(err)
	}
	return env
}

// Created is OrderCreated at version 1.
func (o OrderEvents) Created() event.Envelope {
	return o.build(event.OrderCreated, 1, event.OrderCreatedData{CustomerID: o.Customer, Currency: "CNY", Amount: o.money(),
		Items: []event.PricedItem{{SKU: o.SKU, Quantity: o.Quantity, UnitPrice: o.money()}}})
}

// Paid is OrderPaid at version 3.
func (o OrderEvents) Paid() event.Envelope {
	return o.build(event.OrderPaid, 3, event.OrderPaidData{PaymentID: "P-" + o.OrderID, PaidAmount: o.money(), Currency: "CNY",
		CustomerID: o.Customer, Items: []event.Item{{SKU: o.SKU, Quantity: o.Quantity}}})
}

// RefundRequested is OrderRefundRequested at version 4.
func (o OrderEvents) RefundRequested() event.Envelope {
	return o.build(event.OrderRefundRequested, 4, event.OrderRefundRequestedData{RefundID: "R-" + o.OrderID,
		PaymentID: "P-" + o.OrderID, Amount: o.money(), Currency: "CNY"})
}

// Refunded is OrderRefunded at version 5: the whole amount back, with
// every item.
func (o OrderEvents) Refunded() event.Envelope {
	items := []event.Item{{SKU: o.SKU, Quantity: o.Quantity}}
	return o.build(event.OrderRefunded, 5, event.OrderRefundedData{RefundID: "R-" + o.OrderID, PaymentID: "P-" + o.OrderID,
		RefundedAmount: o.money(), TotalRefundedAmount: o.money(), Currency: "CNY", CustomerID: o.Customer,
		Items: items, TotalReturnedItems: items})
}
