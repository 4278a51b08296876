package e2e_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// A refund, whole or in part, must leave every service telling the same
// story: the order and the payment agree on what was refunded, inventory
// restocks exactly the goods that came back, the order is worth
// floor(paid − refunded) points, and the customer hears of each refund.
func TestPartialRefundsTellOneStory(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-P", 10)
	amount := s.CreateOrder(harness.Order{ID: "O-P1", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-P", Quantity: 2, UnitPrice: "10.00"}}})
	if code, out := s.Pay("O-P1", amount, "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	s.WaitSnapshot("O-P1", paidSnapshot(), 30*time.Second)

	steps := []struct {
		name      string
		body      map[string]any
		snapshot  harness.Snapshot
		refunded  string
		available int
		points    float64
	}{
		// The case: 0.01 of a 2-unit 20.00 order. Nothing comes
		// back to stock, the order is worth 19 points, and the order and the
		// payment both say PARTIALLY_REFUNDED.
		{"a cent back", map[string]any{"amount": "0.01"},
			harness.Snapshot{Order: "PARTIALLY_REFUNDED", OrderVersion: 5, Payment: "PARTIALLY_REFUNDED", Inventory: "DEDUCTED",
				PointsLedger: 2, Notifications: 2}, "0.01", 8, 19},
		{"one unit back at its price", map[string]any{"items": []any{map[string]any{"sku": "SKU-P", "quantity": 1}}},
			harness.Snapshot{Order: "PARTIALLY_REFUNDED", OrderVersion: 7, Payment: "PARTIALLY_REFUNDED", Inventory: "PARTIALLY_RESTOCKED",
				PointsLedger: 3, Notifications: 3}, "10.01", 9, 9},
		{"the last unit for what is left", map[string]any{"amount": "9.99", "items": []any{map[string]any{"sku": "SKU-P", "quantity": 1}}},
			harness.Snapshot{Order: "REFUNDED", OrderVersion: 9, Payment: "REFUNDED", Inventory: "RESTOCKED",
				PointsLedger: 4, Notifications: 4}, "20.00", 10, 0},
	}
	for _, step := range steps {
		out := s.JSON("order", "POST", "/orders/O-P1/refunds", step.body, 200)
		if out["businessCode"] != "SUCCESS" {
			t.Fatalf("%s: %v", step.name, out)
		}
		s.WaitSnapshot("O-P1", step.snapshot, 30*time.Second)
		order := s.JSON("order", "GET", "/orders/O-P1", nil, 200)
		payment := s.JSON("payment", "GET", "/payments/orders/O-P1", nil, 200)
		if order["refundedAmount"] != step.refunded || payment["refunded"] != step.refunded {
			t.Fatalf("%s: order refunded %v, payment refunded %v, want %s", step.name, order["refundedAmount"], payment["refunded"], step.refunded)
		}
		if st := s.Inventory("SKU-P"); st.Available != step.available || st.Available+st.Deducted != 10 {
			t.Fatalf("%s: stock %+v, want %d available of 10", step.name, st, step.available)
		}
		ledger := s.JSON("points", "GET", "/points/orders/O-P1", nil, 200)
		sum := 0.0
		for _, e := range ledger["entries"].([]any) {
			sum += e.(map[string]any)["points"].(float64)
		}
		if sum != step.points {
			t.Fatalf("%s: the order is worth %v points, want %v", step.name, sum, step.points)
		}
	}
	if out := s.JSON("order", "POST", "/orders/O-P1/refunds", map[string]any{"amount": "0.01"}, 200); out["businessCode"] != "ORDER_NOT_REFUNDABLE" {
		t.Fatalf("a refund of a refunded order: %v", out)
	}
}

// The payment service takes the money for an order the customer cancels
// before the payment's callback reaches it. The order records
// OrderPaymentRejected, the payment service returns the money through its
// refund path, the order records OrderPaymentReturned and the customer is
// told. Nothing is edited in another service's database.
func TestPaymentForACancelledOrderIsReturned(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	amount := s.CreateOrder(harness.Order{ID: "O-C1", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-C", Quantity: 1, UnitPrice: "10.00"}}})

	// Hold the payment service's callbacks, as failed deliveries do.
	s.ArmFailPoint("payment", outbox.FailPointBeforePublish, "error", 1000)
	if code, out := s.Pay("O-C1", amount, "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	if out := s.JSON("order", "POST", "/orders/O-C1/cancel", nil, 200); out["businessCode"] != "SUCCESS" || out["status"] != "CANCELLED" {
		t.Fatalf("cancel: %v", out)
	}
	// The held relay met the callback before the cancel could be undone.
	s.WaitFailPointFired("payment", outbox.FailPointBeforePublish, 1, 10*time.Second)
	s.ArmFailPoint("payment", outbox.FailPointBeforePublish, "off", 0)

	s.WaitSnapshot("O-C1", harness.Snapshot{Order: "CANCELLED", OrderVersion: 5, Payment: "REFUNDED", Inventory: "NONE",
		PointsLedger: 0, Notifications: 1}, 30*time.Second)
	payment := s.JSON("payment", "GET", "/payments/orders/O-C1", nil, 200)
	if payment["refunded"] != "10.00" || payment["amount"] != "10.00" {
		t.Fatalf("payment %v, want all 10.00 refunded", payment)
	}
	items := s.JSON("notification", "GET", "/notifications?orderId=O-C1", nil, 200)["items"].([]any)
	if kind := items[0].(map[string]any)["kind"]; kind != "PAYMENT_RETURNED" {
		t.Fatalf("notification %v, want PAYMENT_RETURNED", items[0])
	}
	events := s.JSON("order", "GET", "/orders/O-C1/events", nil, 200)["events"].([]any)
	var types []string
	for _, e := range events {
		types = append(types, e.(map[string]any)["eventType"].(string))
	}
	if want := []string{"OrderCreated", "OrderCheckedOut", "OrderCancelled", "OrderPaymentRejected", "OrderPaymentReturned"}; !slices.Equal(types, want) {
		t.Fatalf("order events %v, want %v", types, want)
	}
	if n := s.DLQCount("O-C1"); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}

// Two customers race for the last unit, and both pay. Inventory deducts it
// for one and rejects the other (INSUFFICIENT_STOCK); it tells the order
// service, which gives the other customer's money back in full and
// cancels that order with OUT_OF_STOCK, with no person involved: points
// net zero, and the customer is told why. Both orders converge, and a
// reconciliation run over them finds nothing.
func TestLastUnitRaceRefundsTheOneWithoutStock(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-L", 1)
	ids := []string{"O-L1", "O-L2"}
	for _, id := range ids {
		amount := s.CreateOrder(harness.Order{ID: id, Customer: "C-" + id, Currency: "CNY",
			Items: []harness.Item{{SKU: "SKU-L", Quantity: 1, UnitPrice: "50.00"}}})
		if code, out := s.Pay(id, amount, "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
			t.Fatalf("pay %s: %d %v", id, code, out)
		}
	}
	cancelled := harness.Snapshot{Order: "CANCELLED", OrderVersion: 5, Payment: "REFUNDED", Inventory: "REJECTED",
		PointsLedger: 2, Notifications: 2}
	var winner, loser string
	s.WaitUntil(30*time.Second, "one order kept the unit and the other was refunded", func() bool {
		a, b := s.Snapshot(ids[0]), s.Snapshot(ids[1])
		switch {
		case a == paidSnapshot() && b == cancelled:
			winner, loser = ids[0], ids[1]
		case b == paidSnapshot() && a == cancelled:
			winner, loser = ids[1], ids[0]
		}
		return winner != ""
	})
	if st := s.Inventory("SKU-L"); st.Available != 0 || st.Deducted != 1 {
		t.Fatalf("stock %+v, want the one unit deducted", st)
	}
	order := s.JSON("order", "GET", "/orders/"+loser, nil, 200)
	payment := s.JSON("payment", "GET", "/payments/orders/"+loser, nil, 200)
	if order["reason"] != "OUT_OF_STOCK" || order["refundedAmount"] != "50.00" || payment["refunded"] != "50.00" {
		t.Fatalf("order %v, payment %v: want cancelled OUT_OF_STOCK with 50.00 back", order, payment)
	}
	ledger := s.JSON("points", "GET", "/points/orders/"+loser, nil, 200)
	sum := 0.0
	for _, e := range ledger["entries"].([]any) {
		sum += e.(map[string]any)["points"].(float64)
	}
	if sum != 0 {
		t.Fatalf("the refunded order is worth %v points, want 0", sum)
	}
	items := s.JSON("notification", "GET", "/notifications?orderId="+loser, nil, 200)["items"].([]any)
	last := items[len(items)-1].(map[string]any)
	if body, _ := last["body"].(string); last["kind"] != "ORDER_REFUNDED" || !strings.Contains(body, "out of stock") {
		t.Fatalf("last notification %v, want the refund told as out of stock", last)
	}
	for _, id := range []string{winner, loser} {
		if !s.Converged(id) {
			t.Fatalf("%s is not converged", id)
		}
	}
	if run := s.Reconcile(winner, loser); len(run.Findings) != 0 {
		t.Fatalf("reconciliation found %+v", run.Findings)
	}
}

// An operator refunds part of a paid order through the payment service's
// operator route, with a unit returned. The order holds the payment, so
// the order records the refund (who asked, why) as it records a
// customer's: the payment refunds it, inventory restocks the unit, points
// are reversed, the customer is told, and reconciliation finds nothing.
// Without X-Operator nothing happens.
func TestOperatorRefundIsRecordedByTheOrder(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-OP", 10)
	amount := s.CreateOrder(harness.Order{ID: "O-OP1", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-OP", Quantity: 2, UnitPrice: "40.00"}}})
	if code, out := s.Pay("O-OP1", amount, "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	s.WaitSnapshot("O-OP1", paidSnapshot(), 30*time.Second)

	if code, raw := s.Call("payment", "POST", "/admin/payments/orders/O-OP1/refunds",
		map[string]any{"refundId": "R-OP-0", "amount": "10.00", "reason": "no operator"}); code != 400 {
		t.Fatalf("without X-Operator: %d %s", code, raw)
	}
	a, err := s.API().OperatorRefund(context.Background(), "O-OP1", "alice@ops", suiteapi.OperatorRefund{RefundID: "R-OP-1",
		Amount: "10.00", Items: []suiteapi.Line{{SKU: "SKU-OP", Quantity: 1}}, Reason: "damaged in transit"})
	if err != nil || a.BusinessCode != "SUCCESS" || a.Status != "REQUESTED" || a.RefundID != "R-OP-1" {
		t.Fatalf("operator refund: %+v %v", a, err)
	}
	s.WaitSnapshot("O-OP1", harness.Snapshot{Order: "PARTIALLY_REFUNDED", OrderVersion: 5, Payment: "PARTIALLY_REFUNDED",
		Inventory: "PARTIALLY_RESTOCKED", PointsLedger: 2, Notifications: 2}, 30*time.Second)
	order := s.JSON("order", "GET", "/orders/O-OP1", nil, 200)
	payment := s.JSON("payment", "GET", "/payments/orders/O-OP1", nil, 200)
	refunds := order["refunds"].([]any)
	r := refunds[0].(map[string]any)
	if order["refundedAmount"] != "10.00" || payment["refunded"] != "10.00" || len(refunds) != 1 ||
		r["requestedBy"] != "alice@ops" || r["reason"] != "damaged in transit" || r["status"] != "SUCCEEDED" {
		t.Fatalf("order %v, payment %v", order, payment)
	}
	if st := s.Inventory("SKU-OP"); st.Available != 9 || st.Deducted != 1 {
		t.Fatalf("stock %+v, want the returned unit back", st)
	}
	if run := s.Reconcile("O-OP1"); len(run.Findings) != 0 {
		t.Fatalf("reconciliation found %+v", run.Findings)
	}
}

// The whole amount came back as money alone; then the customer sends the
// goods back. They come back for nothing: the order records a refund of
// no money (OrderRefunded v3) and stays REFUNDED, inventory restocks both
// units, points stay at zero, the customer is told the goods arrived, and
// reconciliation finds nothing.
func TestGoodsReturnedAfterAMoneyOnlyRefund(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-G", 10)
	amount := s.CreateOrder(harness.Order{ID: "O-G1", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-G", Quantity: 2, UnitPrice: "10.00"}}})
	if code, out := s.Pay("O-G1", amount, "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	s.WaitSnapshot("O-G1", paidSnapshot(), 30*time.Second)
	if out := s.JSON("order", "POST", "/orders/O-G1/refunds", map[string]any{"amount": "20.00"}, 200); out["businessCode"] != "SUCCESS" {
		t.Fatalf("money back: %v", out)
	}
	s.WaitSnapshot("O-G1", harness.Snapshot{Order: "REFUNDED", OrderVersion: 5, Payment: "REFUNDED", Inventory: "DEDUCTED",
		PointsLedger: 2, Notifications: 2}, 30*time.Second)
	out := s.JSON("order", "POST", "/orders/O-G1/refunds", map[string]any{"items": []any{map[string]any{"sku": "SKU-G", "quantity": 2}}}, 200)
	if out["businessCode"] != "SUCCESS" || out["status"] != "REFUNDED" || out["amount"] != "0.00" {
		t.Fatalf("goods back: %v", out)
	}
	s.WaitSnapshot("O-G1", harness.Snapshot{Order: "REFUNDED", OrderVersion: 6, Payment: "REFUNDED", Inventory: "RESTOCKED",
		PointsLedger: 3, Notifications: 3}, 30*time.Second)
	if st := s.Inventory("SKU-G"); st.Available != 10 || st.Deducted != 0 {
		t.Fatalf("stock %+v, want both units back", st)
	}
	order := s.JSON("order", "GET", "/orders/O-G1", nil, 200)
	payment := s.JSON("payment", "GET", "/payments/orders/O-G1", nil, 200)
	if order["refundedAmount"] != "20.00" || payment["refunded"] != "20.00" {
		t.Fatalf("order %v, payment %v: want 20.00 refunded once", order, payment)
	}
	items := s.JSON("notification", "GET", "/notifications?orderId=O-G1", nil, 200)["items"].([]any)
	if body, _ := items[len(items)-1].(map[string]any)["body"].(string); !strings.Contains(body, "received the items") {
		t.Fatalf("last notification %v, want the goods told as received", items[len(items)-1])
	}
	if run := s.Reconcile("O-G1"); len(run.Findings) != 0 {
		t.Fatalf("reconciliation found %+v", run.Findings)
	}
}
