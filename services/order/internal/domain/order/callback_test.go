package order_test

import (
	"errors"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// TestCallbackValidate: every field of a callback is checked before it
// touches an order, whichever field comes after an accepted one; a refund's
// callback may leave its paymentId out, but one it names must be an id.
func TestCallbackValidate(t *testing.T) {
	refunded := func(edit func(*order.Callback)) order.Callback {
		cb := order.Callback{ID: "E-1", Type: rules.CallbackRefundSucceeded, OrderID: "O-1", PaymentID: "P-1", RefundID: "R-1",
			Amount: dec("30.00"), Currency: "CNY", Reason: "damaged"}
		edit(&cb)
		return cb
	}
	tests := []struct {
		name    string
		cb      order.Callback
		wantErr string // the field refused, "" for none
	}{
		{"a refund's callback", refunded(func(*order.Callback) {}), ""},
		{"a refund's callback without its paymentId", refunded(func(cb *order.Callback) { cb.PaymentID = "" }), ""},
		{"a refund's callback with a malformed paymentId", refunded(func(cb *order.Callback) { cb.PaymentID = "P 1" }), "paymentId"},
		{"a payment's callback without its paymentId", refunded(func(cb *order.Callback) { cb.Type, cb.PaymentID = rules.CallbackPaymentSucceeded, "" }), "paymentId"},
		{"a shortage without its paymentId", refunded(func(cb *order.Callback) { cb.Type, cb.PaymentID = rules.CallbackStockRejected, "" }), "paymentId"},
		{"a refund's callback without its refundId", refunded(func(cb *order.Callback) { cb.RefundID = "" }), "refundId"},
		{"no amount", refunded(func(cb *order.Callback) { cb.Amount = dec("0") }), "amount"},
		{"a good amount, no currency", refunded(func(cb *order.Callback) { cb.Currency = "" }), "currency"},
		{"a good amount and currency, a reason of two lines", refunded(func(cb *order.Callback) { cb.Reason = "damaged\nin transit" }), "reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cb.Validate()
			var broken *rules.RuleError
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (!errors.As(err, &broken) || broken.Field != tt.wantErr):
				t.Fatalf("Validate() = %v, want %s refused", err, tt.wantErr)
			}
		})
	}
}

// TestSettlingAnotherRefundNamesThePendingOne: a refund's callback for a
// refund the order is not waiting for is a mismatch that names the one it
// is waiting for, so the operator sees which refund is outstanding.
func TestSettlingAnotherRefundNamesThePendingOne(t *testing.T) {
	for _, typ := range []rules.CallbackType{rules.CallbackRefundSucceeded, rules.CallbackRefundRejected} {
		t.Run(string(typ), func(t *testing.T) {
			o := at(t, order.StatusRefunding)
			_, err := o.ApplyCallback(order.Callback{ID: "E-9", Type: typ, OrderID: "O-1", PaymentID: "P-1", RefundID: "R-X",
				Amount: dec("30.00"), Currency: "CNY"})
			var merr *order.MismatchError
			if !errors.As(err, &merr) || merr.Field != "refundId" || merr.Want != "R-1" || merr.Got != "R-X" {
				t.Fatalf("got %#v, want a refundId mismatch wanting R-1, got R-X", err)
			}
		})
	}
}

// TestReturnOfEveryLine: a return may list as many lines as an order may
// hold, and is priced at the order's unit prices; one line more is refused.
func TestReturnOfEveryLine(t *testing.T) {
	all := items(rules.MaxItems)
	lines := make([]order.Line, len(all))
	for i, it := range all {
		lines[i] = line(it.SKU, it.Quantity)
	}
	for _, tt := range []struct {
		name    string
		lines   []order.Line
		wantErr bool
	}{
		{"every line", lines, false},
		{"one line more", append(lines[:len(lines):len(lines)], lines[0]), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := order.New("O-1", "C-1", "CNY", all)
			if err != nil {
				t.Fatal(err)
			}
			o.Status, o.Version, o.PaymentID = order.StatusPaid, 3, "P-1"
			events, err := o.RequestRefund(order.RefundRequest{ID: "R-1", Items: tt.lines})
			if (err != nil) != tt.wantErr {
				t.Fatalf("RequestRefund() = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (len(events) != 1 || !events[0].Amount.Equal(o.Amount) || len(events[0].Items) != rules.MaxItems) {
				t.Fatalf("events %+v, want one refund of all %s", events, o.Amount)
			}
		})
	}
}

// TestPaymentTheOrderCannotTakeIsReturnedWithItsReason: a payment the
// order cannot take is returned, whole and in its own currency, and the
// return says why, so the customer and the operator are told the right
// story; the order stays where it was.
func TestPaymentTheOrderCannotTakeIsReturnedWithItsReason(t *testing.T) {
	tests := []struct {
		name       string
		status     order.Status
		amount     string
		currency   string
		wantReason string // a prefix: the amount mismatch names both amounts
	}{
		{"an order not checked out", order.StatusCreated, "80.00", "CNY", order.ReasonOrderNotPayable},
		{"a cancelled order", order.StatusCancelled, "80.00", "CNY", order.ReasonOrderCancelled},
		{"another amount", order.StatusPendingPayment, "79.99", "CNY", order.ReasonAmountMismatch + ": order has 80.00 CNY, payment 79.99 CNY"},
		{"another currency", order.StatusPendingPayment, "80.00", "USD", order.ReasonAmountMismatch + ": order has 80.00 CNY, payment 80.00 USD"},
		{"an order paid by another payment", order.StatusPaid, "80.00", "CNY", order.ReasonPaidByAnother},
		{"an order refunded in part, paid by another payment", order.StatusPartiallyRefunded, "80.00", "CNY", order.ReasonPaidByAnother},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := at(t, tt.status)
			if tt.status == order.StatusCreated {
				o.Version = 1
			}
			version := o.Version
			events, err := o.ApplyCallback(order.Callback{ID: "E-9", Type: rules.CallbackPaymentSucceeded, OrderID: "O-1", PaymentID: "P-2",
				Amount: dec(tt.amount), Currency: tt.currency})
			if err != nil || len(events) != 1 {
				t.Fatalf("%+v %v", events, err)
			}
			e := events[0]
			if e.Type != order.EventPaymentRejected || e.PaymentID != "P-2" || !e.Amount.Equal(dec(tt.amount)) || e.Currency != tt.currency ||
				e.Reason != tt.wantReason || e.RefundID != rules.ReturnRefundID("P-2") {
				t.Fatalf("event %+v, want the return of P-2's %s %s for %q", e, tt.amount, tt.currency, tt.wantReason)
			}
			if o.Status != tt.status || o.Version != version+1 {
				t.Fatalf("order %s version %d, want %s version %d", o.Status, o.Version, tt.status, version+1)
			}
		})
	}
}
