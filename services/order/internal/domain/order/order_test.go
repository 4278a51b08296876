package order_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func items(n int) []order.Item {
	out := make([]order.Item, n)
	for i := range out {
		out[i] = order.Item{SKU: "SKU-" + strconv.Itoa(i), Quantity: 1, UnitPrice: dec("1.00")}
	}
	return out
}

func TestNew(t *testing.T) {
	o, err := order.New("O-1", "C-1", "CNY", []order.Item{
		{SKU: "SKU-1", Quantity: 2, UnitPrice: dec("40.00")},
		{SKU: "SKU-2", Quantity: 3, UnitPrice: dec("0.5")},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if o.Status != order.StatusCreated || o.Version != 1 || !o.Amount.Equal(dec("81.50")) {
		t.Fatalf("got status %s version %d amount %s, want CREATED 1 81.50", o.Status, o.Version, o.Amount)
	}
	if e := o.CreatedEvent(); e.Type != order.EventCreated || e.Version != 1 {
		t.Fatalf("created event %+v", e)
	}
}

func TestNewRejectsInvalidInput(t *testing.T) {
	valid := []order.Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: dec("1.00")}}
	tests := []struct {
		name       string
		id         string
		customerID string
		currency   string
		items      []order.Item
		wantField  string
	}{
		{"missing id", "", "C-1", "CNY", valid, "orderId"},
		{"id with a slash", "O/1", "C-1", "CNY", valid, "orderId"},
		{"id too long", strings.Repeat("x", 129), "C-1", "CNY", valid, "orderId"},
		{"missing customer", "O-1", "", "CNY", valid, "customerId"},
		{"blank customer", "O-1", "  ", "CNY", valid, "customerId"},
		{"missing currency", "O-1", "C-1", "", valid, "currency"},
		{"lower-case currency", "O-1", "C-1", "cny", valid, "currency"},
		{"four-letter currency", "O-1", "C-1", "CNYY", valid, "currency"},
		{"digit currency", "O-1", "C-1", "CN1", valid, "currency"},
		{"customer with a space", "O-1", "C 1", "CNY", valid, "customerId"},
		{"customer as an e-mail address", "O-1", "a@b.c", "CNY", valid, "customerId"},
		{"no items", "O-1", "C-1", "CNY", nil, "items"},
		{"too many items", "O-1", "C-1", "CNY", items(101), "items"},
		{"missing sku", "O-1", "C-1", "CNY", []order.Item{{Quantity: 1, UnitPrice: dec("1")}}, "items[0].sku"},
		{"sku with a space, refused by inventory", "O-1", "C-1", "CNY", []order.Item{{SKU: "SKU 1", Quantity: 1, UnitPrice: dec("1")}}, "items[0].sku"},
		{"quantity above the maximum", "O-1", "C-1", "CNY", []order.Item{{SKU: "A", Quantity: rules.MaxQuantity + 1, UnitPrice: dec("1")}}, "items[0].quantity"},
		{"zero price, an order nobody can pay", "O-1", "C-1", "CNY", []order.Item{{SKU: "A", Quantity: 1, UnitPrice: dec("0")}}, "items[0].unitPrice"},
		{"zero quantity", "O-1", "C-1", "CNY", []order.Item{{SKU: "A", Quantity: 0, UnitPrice: dec("1")}}, "items[0].quantity"},
		{"negative quantity", "O-1", "C-1", "CNY", []order.Item{{SKU: "A", Quantity: -1, UnitPrice: dec("1")}}, "items[0].quantity"},
		{"negative price", "O-1", "C-1", "CNY", []order.Item{{SKU: "A", Quantity: 1, UnitPrice: dec("-1")}}, "items[0].unitPrice"},
		{"three decimal places", "O-1", "C-1", "CNY", []order.Item{{SKU: "A", Quantity: 1, UnitPrice: dec("1.005")}}, "items[0].unitPrice"},
		{"duplicate sku", "O-1", "C-1", "CNY", []order.Item{
			{SKU: "A", Quantity: 1, UnitPrice: dec("1")}, {SKU: "B", Quantity: 1, UnitPrice: dec("1")}, {SKU: "A", Quantity: 2, UnitPrice: dec("1")},
		}, "items[2].sku"},
		{"price overflows", "O-1", "C-1", "CNY", []order.Item{{SKU: "A", Quantity: 1, UnitPrice: dec("99999999999999999")}}, "items[0].unitPrice"},
		{"total overflows", "O-1", "C-1", "CNY", []order.Item{{SKU: "A", Quantity: 1000, UnitPrice: dec("99999999999999")}}, "items"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := order.New(tt.id, tt.customerID, tt.currency, tt.items)
			var verr *rules.RuleError
			if !errors.As(err, &verr) {
				t.Fatalf("got %v, want a *rules.RuleError", err)
			}
			if verr.Field != tt.wantField {
				t.Fatalf("field %q, want %q (%v)", verr.Field, tt.wantField, err)
			}
		})
	}
}

func TestNewAcceptsLimits(t *testing.T) {
	if _, err := order.New("O-1", "C-1", "CNY", items(rules.MaxItems)); err != nil {
		t.Fatalf("%d items: %v", rules.MaxItems, err)
	}
	if _, err := order.New("O-1", "C-1", "CNY", []order.Item{{SKU: "A", Quantity: 1, UnitPrice: dec("0.01")}}); err != nil {
		t.Fatalf("cheapest item: %v", err)
	}
	largest := []order.Item{{SKU: strings.Repeat("S", rules.MaxIDLength), Quantity: rules.MaxQuantity, UnitPrice: dec("9999999999.99")}}
	if _, err := order.New(strings.Repeat("O", rules.MaxIDLength), strings.Repeat("C", rules.MaxIDLength), "CNY", largest); err != nil {
		t.Fatalf("largest values: %v", err)
	}
}

// at returns an order of two SKU-1 at 40.00 in status s, with the version
// and refunds the lifecycle gives it.
func at(t *testing.T, s order.Status) *order.Order {
	t.Helper()
	o, err := order.New("O-1", "C-1", "CNY", []order.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: dec("40.00")}})
	if err != nil {
		t.Fatal(err)
	}
	refund := func(amount string, status order.RefundStatus, items ...order.Line) order.Refund {
		return order.Refund{ID: "R-1", Kind: order.KindRefund, PaymentID: "P-1", Amount: dec(amount), Currency: "CNY",
			Items: items, Status: status}
	}
	o.Status = s
	switch s {
	case order.StatusPendingPayment:
		o.Version = 2
	case order.StatusPaid:
		o.Version, o.PaymentID = 3, "P-1"
	case order.StatusRefunding:
		o.Version, o.PaymentID = 4, "P-1"
		o.Refunds = []order.Refund{refund("30.00", order.RefundRequested)}
	case order.StatusPartiallyRefunded:
		o.Version, o.PaymentID = 5, "P-1"
		o.Refunds = []order.Refund{refund("30.00", order.RefundSucceeded)}
	case order.StatusRefunded:
		o.Version, o.PaymentID = 5, "P-1"
		o.Refunds = []order.Refund{refund("80.00", order.RefundSucceeded, order.Line{SKU: "SKU-1", Quantity: 2})}
	case order.StatusCancelled:
		o.Version = 2
	}
	return o
}

type outcome int

const (
	applied outcome = iota
	repeat
	transition
	mismatch
	returnRefused
	validation
)

func check(t *testing.T, o *order.Order, before int64, events []order.Event, err error, want outcome, wantStatus order.Status, wantEvent order.EventType) {
	t.Helper()
	var terr *order.TransitionError
	var merr *order.MismatchError
	var rerr *order.ReturnError
	var verr *rules.RuleError
	switch want {
	case applied:
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		if len(events) != 1 || events[0].Type != wantEvent || events[0].Version != before+1 {
			t.Fatalf("events %+v, want one %s at version %d", events, wantEvent, before+1)
		}
		if o.Version != before+1 {
			t.Fatalf("version %d, want %d", o.Version, before+1)
		}
	case repeat:
		if err != nil || len(events) != 0 {
			t.Fatalf("got %+v, %v; want a no-op", events, err)
		}
	case transition:
		if !errors.As(err, &terr) {
			t.Fatalf("got %v, want a TransitionError", err)
		}
	case mismatch:
		if !errors.As(err, &merr) {
			t.Fatalf("got %v, want a MismatchError", err)
		}
	case returnRefused:
		if !errors.As(err, &rerr) {
			t.Fatalf("got %v, want a ReturnError", err)
		}
	case validation:
		if !errors.As(err, &verr) {
			t.Fatalf("got %v, want a *rules.RuleError", err)
		}
	}
	if want != applied {
		if len(events) != 0 || o.Version != before {
			t.Fatalf("a refused or repeated action changed the order: events %+v, version %d", events, o.Version)
		}
	}
	if o.Status != wantStatus {
		t.Fatalf("status %s, want %s", o.Status, wantStatus)
	}
}

func line(sku string, n int) order.Line { return order.Line{SKU: sku, Quantity: n} }

func TestCommands(t *testing.T) {
	checkout := func(o *order.Order) ([]order.Event, error) { return o.Checkout() }
	cancel := func(o *order.Order) ([]order.Event, error) { return o.Cancel("changed my mind") }
	refund := func(amount string, items ...order.Line) func(o *order.Order) ([]order.Event, error) {
		return func(o *order.Order) ([]order.Event, error) {
			return o.RequestRefund(order.RefundRequest{ID: "R-2", Amount: dec(amount), Items: items})
		}
	}
	tests := []struct {
		name       string
		from       order.Status
		do         func(*order.Order) ([]order.Event, error)
		want       outcome
		wantStatus order.Status
		wantEvent  order.EventType
	}{
		{"checkout created", order.StatusCreated, checkout, applied, order.StatusPendingPayment, order.EventCheckedOut},
		{"checkout again", order.StatusPendingPayment, checkout, repeat, order.StatusPendingPayment, ""},
		{"checkout paid", order.StatusPaid, checkout, transition, order.StatusPaid, ""},
		{"checkout cancelled", order.StatusCancelled, checkout, transition, order.StatusCancelled, ""},
		{"cancel created", order.StatusCreated, cancel, applied, order.StatusCancelled, order.EventCancelled},
		{"cancel pending payment", order.StatusPendingPayment, cancel, applied, order.StatusCancelled, order.EventCancelled},
		{"cancel again", order.StatusCancelled, cancel, repeat, order.StatusCancelled, ""},
		{"cancel paid", order.StatusPaid, cancel, transition, order.StatusPaid, ""},
		{"cancel refunded", order.StatusRefunded, cancel, transition, order.StatusRefunded, ""},
		{"refund money of a paid order", order.StatusPaid, refund("30.00"), applied, order.StatusRefunding, order.EventRefundRequested},
		{"refund goods of a paid order", order.StatusPaid, refund("0", line("SKU-1", 1)), applied, order.StatusRefunding, order.EventRefundRequested},
		{"refund goods for less than their price", order.StatusPaid, refund("10.00", line("SKU-1", 2)), applied, order.StatusRefunding, order.EventRefundRequested},
		{"refund again after a partial refund", order.StatusPartiallyRefunded, refund("0", line("SKU-1", 2)), applied, order.StatusRefunding, order.EventRefundRequested},
		{"refund more than paid is not checked here", order.StatusPaid, refund("1000.00"), applied, order.StatusRefunding, order.EventRefundRequested},
		{"refund nothing", order.StatusPaid, refund("0"), validation, order.StatusPaid, ""},
		{"refund negative", order.StatusPaid, refund("-1"), validation, order.StatusPaid, ""},
		{"refund three places", order.StatusPaid, refund("1.001"), validation, order.StatusPaid, ""},
		{"refund a SKU not on the order", order.StatusPaid, refund("0", line("SKU-9", 1)), validation, order.StatusPaid, ""},
		{"refund a SKU twice", order.StatusPaid, refund("0", line("SKU-1", 1), line("SKU-1", 1)), validation, order.StatusPaid, ""},
		{"refund zero units", order.StatusPaid, refund("0", line("SKU-1", 0)), validation, order.StatusPaid, ""},
		{"return more than ordered", order.StatusPaid, refund("0", line("SKU-1", 3)), returnRefused, order.StatusPaid, ""},
		{"refund created", order.StatusCreated, refund("1"), transition, order.StatusCreated, ""},
		{"refund pending payment", order.StatusPendingPayment, refund("1"), transition, order.StatusPendingPayment, ""},
		{"refund while refunding", order.StatusRefunding, refund("1"), transition, order.StatusRefunding, ""},
		{"refund refunded", order.StatusRefunded, refund("1"), transition, order.StatusRefunded, ""},
		{"refund cancelled", order.StatusCancelled, refund("1"), transition, order.StatusCancelled, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := at(t, tt.from)
			before := o.Version
			events, err := tt.do(o)
			check(t, o, before, events, err, tt.want, tt.wantStatus, tt.wantEvent)
		})
	}
}

func TestRequestRefundRecordsTheRefund(t *testing.T) {
	o := at(t, order.StatusPaid)
	events, err := o.RequestRefund(order.RefundRequest{ID: "R-9", Items: []order.Line{line("SKU-1", 1)}})
	if err != nil {
		t.Fatal(err)
	}
	r := o.PendingRefund()
	if r == nil || r.ID != "R-9" || !r.Amount.Equal(dec("40")) || len(r.Items) != 1 || r.Kind != order.KindRefund ||
		events[0].RefundID != "R-9" || !events[0].Amount.Equal(dec("40")) {
		t.Fatalf("refund %+v events %+v", r, events)
	}
}

// shortage is the inventory service's report that the stock could not
// cover the order paid by paymentID.
func shortage(paymentID string) order.Callback {
	return order.Callback{ID: "E-S", Type: rules.CallbackStockRejected, OrderID: "O-1", PaymentID: paymentID,
		Amount: dec("80.00"), Currency: "CNY", Reason: "INSUFFICIENT_STOCK"}
}

// A refund asked again under its id, while it is pending or after it
// settled, changes nothing: a keyed request that runs again after its
// first run's answer was lost names the same refund.
func TestRequestRefundAgainChangesNothing(t *testing.T) {
	o := at(t, order.StatusPaid)
	req := order.RefundRequest{ID: "R-9", Amount: dec("30"), Items: []order.Line{line("SKU-1", 1)}}
	if _, err := o.RequestRefund(req); err != nil {
		t.Fatal(err)
	}
	version := o.Version
	for _, when := range []string{"pending", "settled"} {
		if when == "settled" {
			if _, err := o.ApplyCallback(order.Callback{ID: "E-2", Type: rules.CallbackRefundSucceeded, OrderID: o.ID,
				PaymentID: o.PaymentID, RefundID: "R-9", Amount: dec("30"), Currency: o.Currency}); err != nil {
				t.Fatal(err)
			}
			version = o.Version
		}
		events, err := o.RequestRefund(req)
		if err != nil || len(events) != 0 || o.Version != version || len(o.Refunds) != 1 || !o.RefundedAmount().Equal(dec(map[string]string{"pending": "0", "settled": "30"}[when])) {
			t.Fatalf("%s: asked again: events %v, %v, version %d (was %d), %d refunds", when, events, err, o.Version, version, len(o.Refunds))
		}
	}
}

func TestApplyCallback(t *testing.T) {
	paid := func(amount, currency string) order.Callback {
		return order.Callback{ID: "E-1", Type: rules.CallbackPaymentSucceeded, OrderID: "O-1", PaymentID: "P-1", Amount: dec(amount), Currency: currency}
	}
	paidBy := func(paymentID string) order.Callback {
		cb := paid("80.00", "CNY")
		cb.PaymentID = paymentID
		return cb
	}
	refunded := func(refundID string) order.Callback {
		return order.Callback{ID: "E-2", Type: rules.CallbackRefundSucceeded, OrderID: "O-1", PaymentID: "P-1", RefundID: refundID, Amount: dec("30.00"), Currency: "CNY"}
	}
	rejected := func(refundID string) order.Callback {
		return order.Callback{ID: "E-3", Type: rules.CallbackRefundRejected, OrderID: "O-1", PaymentID: "P-1", RefundID: refundID,
			Amount: dec("30.00"), Currency: "CNY", Reason: "REFUND_EXCEEDS_PAYMENT"}
	}
	tests := []struct {
		name       string
		from       order.Status
		cb         order.Callback
		want       outcome
		wantStatus order.Status
		wantEvent  order.EventType
	}{
		{"payment for pending order", order.StatusPendingPayment, paid("80.00", "CNY"), applied, order.StatusPaid, order.EventPaid},
		{"payment amount written differently", order.StatusPendingPayment, paid("80", "CNY"), applied, order.StatusPaid, order.EventPaid},
		{"payment when paid", order.StatusPaid, paid("80.00", "CNY"), repeat, order.StatusPaid, ""},
		{"payment when refunding", order.StatusRefunding, paid("80.00", "CNY"), repeat, order.StatusRefunding, ""},
		{"payment when refunded", order.StatusRefunded, paid("80.00", "CNY"), repeat, order.StatusRefunded, ""},
		// Money that moved for an order that cannot take it is returned.
		{"payment for cancelled order", order.StatusCancelled, paid("80.00", "CNY"), applied, order.StatusCancelled, order.EventPaymentRejected},
		{"payment for created order", order.StatusCreated, paid("80.00", "CNY"), applied, order.StatusCreated, order.EventPaymentRejected},
		{"payment of the wrong amount", order.StatusPendingPayment, paid("79.99", "CNY"), applied, order.StatusPendingPayment, order.EventPaymentRejected},
		{"payment in the wrong currency", order.StatusPendingPayment, paid("80.00", "USD"), applied, order.StatusPendingPayment, order.EventPaymentRejected},
		{"a second payment of a paid order", order.StatusPaid, paidBy("P-2"), applied, order.StatusPaid, order.EventPaymentRejected},
		{"refund succeeded in part", order.StatusRefunding, refunded("R-1"), applied, order.StatusPartiallyRefunded, order.EventRefunded},
		{"refund succeeded again", order.StatusPartiallyRefunded, refunded("R-1"), repeat, order.StatusPartiallyRefunded, ""},
		{"refund succeeded for another refund", order.StatusRefunding, refunded("R-X"), mismatch, order.StatusRefunding, ""},
		{"refund succeeded when refunded by another", order.StatusRefunded, refunded("R-X"), transition, order.StatusRefunded, ""},
		{"refund succeeded when paid", order.StatusPaid, refunded("R-1"), transition, order.StatusPaid, ""},
		{"refund rejected", order.StatusRefunding, rejected("R-1"), applied, order.StatusPaid, order.EventRefundRejected},
		{"refund rejected for another refund", order.StatusRefunding, rejected("R-X"), mismatch, order.StatusRefunding, ""},
		{"refund rejected when refunded", order.StatusRefunded, rejected("R-1"), transition, order.StatusRefunded, ""},
		{"refund rejected when never refunded", order.StatusPaid, rejected("R-1"), transition, order.StatusPaid, ""},
		{"unknown type", order.StatusPendingPayment, order.Callback{ID: "E-1", Type: "PAYMENT_FAILED", OrderID: "O-1", Amount: dec("1"), Currency: "CNY"}, validation, order.StatusPendingPayment, ""},
		{"missing callback id", order.StatusPendingPayment, order.Callback{Type: rules.CallbackPaymentSucceeded, OrderID: "O-1", PaymentID: "P-1", Amount: dec("80"), Currency: "CNY"}, validation, order.StatusPendingPayment, ""},
		{"payment without payment id", order.StatusPendingPayment, order.Callback{ID: "E-1", Type: rules.CallbackPaymentSucceeded, OrderID: "O-1", Amount: dec("80"), Currency: "CNY"}, validation, order.StatusPendingPayment, ""},
		{"refund without refund id", order.StatusRefunding, refunded(""), validation, order.StatusRefunding, ""},
		{"callback for another order", order.StatusPendingPayment, order.Callback{ID: "E-1", Type: rules.CallbackPaymentSucceeded, OrderID: "O-2", PaymentID: "P-1", Amount: dec("80"), Currency: "CNY"}, mismatch, order.StatusPendingPayment, ""},
		{"shortage of a paid order", order.StatusPaid, shortage("P-1"), applied, order.StatusRefunding, order.EventRefundRequested},
		{"shortage of a partly refunded order", order.StatusPartiallyRefunded, shortage("P-1"), applied, order.StatusRefunding, order.EventRefundRequested},
		{"shortage of an order refunded in full", order.StatusRefunded, shortage("P-1"), repeat, order.StatusRefunded, ""},
		{"shortage of another payment", order.StatusPaid, shortage("P-2"), mismatch, order.StatusPaid, ""},
		{"shortage of an unpaid order", order.StatusPendingPayment, shortage("P-1"), transition, order.StatusPendingPayment, ""},
		{"shortage of a cancelled order", order.StatusCancelled, shortage("P-1"), transition, order.StatusCancelled, ""},
		{"shortage without payment id", order.StatusPaid, shortage(""), validation, order.StatusPaid, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := at(t, tt.from)
			before := o.Version
			events, err := o.ApplyCallback(tt.cb)
			check(t, o, before, events, err, tt.want, tt.wantStatus, tt.wantEvent)
		})
	}
}

// TestPartialRefundsUntilTheWholeAmount is the refund model: each refund
// gives back money and the goods it names; the order is PARTIALLY_REFUNDED
// until the whole amount is back.
func TestPartialRefundsUntilTheWholeAmount(t *testing.T) {
	o := at(t, order.StatusPaid)
	steps := []struct {
		req        order.RefundRequest
		wantStatus order.Status
		refunded   string
		returned   int
	}{
		{order.RefundRequest{ID: "R-1", Items: []order.Line{line("SKU-1", 1)}}, order.StatusPartiallyRefunded, "40", 1},
		{order.RefundRequest{ID: "R-2", Amount: dec("0.01")}, order.StatusPartiallyRefunded, "40.01", 1},
		{order.RefundRequest{ID: "R-3", Amount: dec("39.99"), Items: []order.Line{line("SKU-1", 1)}}, order.StatusRefunded, "80", 2},
	}
	version := o.Version
	for i, step := range steps {
		if _, err := o.RequestRefund(step.req); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		r := o.PendingRefund()
		events, err := o.ApplyCallback(order.Callback{ID: "E-" + step.req.ID, Type: rules.CallbackRefundSucceeded, OrderID: "O-1",
			PaymentID: "P-1", RefundID: r.ID, Amount: r.Amount, Currency: "CNY"})
		if err != nil || len(events) != 1 || events[0].Type != order.EventRefunded || events[0].Version != version+2 {
			t.Fatalf("step %d: %+v %v", i, events, err)
		}
		version += 2
		returned := 0
		for _, l := range o.ReturnedItems() {
			returned += l.Quantity
		}
		if o.Status != step.wantStatus || !o.RefundedAmount().Equal(dec(step.refunded)) || returned != step.returned {
			t.Fatalf("step %d: %s refunded %s returned %d, want %s %s %d", i, o.Status, o.RefundedAmount(), returned,
				step.wantStatus, step.refunded, step.returned)
		}
	}
	if _, err := o.RequestRefund(order.RefundRequest{ID: "R-4", Amount: dec("1")}); err == nil {
		t.Fatal("a refunded order took another refund")
	}
}

func TestRejectedRefundGoesBackToWhereTheOrderWas(t *testing.T) {
	o := at(t, order.StatusPartiallyRefunded)
	if _, err := o.RequestRefund(order.RefundRequest{ID: "R-2", Amount: dec("500")}); err != nil {
		t.Fatal(err)
	}
	events, err := o.ApplyCallback(order.Callback{ID: "E-9", Type: rules.CallbackRefundRejected, OrderID: "O-1", PaymentID: "P-1",
		RefundID: "R-2", Amount: dec("500"), Currency: "CNY", Reason: "REFUND_EXCEEDS_PAYMENT"})
	if err != nil || len(events) != 1 || events[0].Reason != "REFUND_EXCEEDS_PAYMENT" {
		t.Fatalf("%+v %v", events, err)
	}
	if o.Status != order.StatusPartiallyRefunded || !o.RefundedAmount().Equal(dec("30")) || o.Refund("R-2").Status != order.RefundRejected {
		t.Fatalf("order %s refunded %s, refund %+v", o.Status, o.RefundedAmount(), o.Refund("R-2"))
	}
}

// TestPaymentForACancelledOrderIsReturned: the payment service charged an
// order that was cancelled before the charge reached it. The order records
// OrderPaymentRejected with the refund that returns it, then
// OrderPaymentReturned when the payment service has returned it, and stays
// CANCELLED throughout.
func TestPaymentForACancelledOrderIsReturned(t *testing.T) {
	o := at(t, order.StatusCancelled)
	pay := order.Callback{ID: "E-1", Type: rules.CallbackPaymentSucceeded, OrderID: "O-1", PaymentID: "P-1", Amount: dec("80"), Currency: "CNY"}
	events, err := o.ApplyCallback(pay)
	if err != nil || len(events) != 1 {
		t.Fatalf("%+v %v", events, err)
	}
	e := events[0]
	if e.Type != order.EventPaymentRejected || e.Version != 3 || e.PaymentID != "P-1" || !e.Amount.Equal(dec("80")) ||
		e.Reason != order.ReasonOrderCancelled || e.RefundID != rules.ReturnRefundID("P-1") {
		t.Fatalf("event %+v", e)
	}
	pay.ID = "E-1b" // the same payment told again
	if events, err := o.ApplyCallback(pay); err != nil || len(events) != 0 {
		t.Fatalf("repeat: %+v %v", events, err)
	}
	returned := order.Callback{ID: "E-2", Type: rules.CallbackRefundSucceeded, OrderID: "O-1", PaymentID: "P-1", RefundID: e.RefundID,
		Amount: dec("80"), Currency: "CNY"}
	events, err = o.ApplyCallback(returned)
	if err != nil || len(events) != 1 || events[0].Type != order.EventPaymentReturned || events[0].Version != 4 {
		t.Fatalf("returned: %+v %v", events, err)
	}
	if events, err := o.ApplyCallback(returned); err != nil || len(events) != 0 {
		t.Fatalf("returned again: %+v %v", events, err)
	}
	if o.Status != order.StatusCancelled || !o.RefundedAmount().IsZero() || o.Refund(e.RefundID).Status != order.RefundSucceeded {
		t.Fatalf("order %s refunded %s, return %+v", o.Status, o.RefundedAmount(), o.Refund(e.RefundID))
	}
}

// TestShortageGivesTheRestBackAndCancels: the stock could not cover a
// paid order. The order asks for all the money it still holds (here after
// a partial refund of 30.00: 50.00), under the refund id of the shortage,
// with no goods, and is CANCELLED with OUT_OF_STOCK once the refund
// succeeds. Told again, at any point, the shortage changes nothing.
func TestShortageGivesTheRestBackAndCancels(t *testing.T) {
	o := at(t, order.StatusPartiallyRefunded)
	events, err := o.ApplyCallback(shortage("P-1"))
	if err != nil || len(events) != 1 {
		t.Fatalf("%+v %v", events, err)
	}
	e := events[0]
	if e.Type != order.EventRefundRequested || e.RefundID != rules.ShortageRefundID("O-1") || !e.Amount.Equal(dec("50")) ||
		len(e.Items) != 0 || e.Reason != rules.ReasonOutOfStock {
		t.Fatalf("event %+v", e)
	}
	if o.Status != order.StatusRefunding || o.Reason != rules.ReasonOutOfStock {
		t.Fatalf("order %s reason %q", o.Status, o.Reason)
	}
	again := shortage("P-1")
	again.ID = "E-S2"
	if events, err := o.ApplyCallback(again); err != nil || len(events) != 0 {
		t.Fatalf("told again while refunding: %+v %v", events, err)
	}
	events, err = o.ApplyCallback(order.Callback{ID: "E-R", Type: rules.CallbackRefundSucceeded, OrderID: "O-1", PaymentID: "P-1",
		RefundID: e.RefundID, Amount: dec("50"), Currency: "CNY"})
	if err != nil || len(events) != 1 || events[0].Type != order.EventRefunded || events[0].Reason != rules.ReasonOutOfStock {
		t.Fatalf("refunded: %+v %v", events, err)
	}
	if o.Status != order.StatusCancelled || !o.RefundedAmount().Equal(o.Amount) || len(o.ReturnedItems()) != 0 {
		t.Fatalf("order %s refunded %s of %s, returned %v", o.Status, o.RefundedAmount(), o.Amount, o.ReturnedItems())
	}
	if events, err := o.ApplyCallback(again); err != nil || len(events) != 0 {
		t.Fatalf("told again once cancelled: %+v %v", events, err)
	}
	if _, err := o.RequestRefund(order.RefundRequest{ID: "R-9", Amount: dec("1")}); err == nil {
		t.Fatal("an order cancelled for a shortage took a refund")
	}
}

// TestGoodsComeBackAfterAMoneyOnlyRefund: the whole 80.00 came back as
// money alone; the two units returned afterwards come back for nothing:
// a refund of no money, succeeded at once, the order still REFUNDED, and
// the goods returned count. More than the order holds is still refused;
// goods whose price is partly left come back for what is left.
func TestGoodsComeBackAfterAMoneyOnlyRefund(t *testing.T) {
	o := at(t, order.StatusPaid)
	if _, err := o.RequestRefund(order.RefundRequest{ID: "R-1", Amount: dec("75")}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ApplyCallback(order.Callback{ID: "E-1", Type: rules.CallbackRefundSucceeded, OrderID: "O-1", PaymentID: "P-1",
		RefundID: "R-1", Amount: dec("75"), Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	// 5.00 is left: one unit back asks for those 5.00.
	events, err := o.RequestRefund(order.RefundRequest{ID: "R-2", Items: []order.Line{line("SKU-1", 1)}})
	if err != nil || len(events) != 1 || events[0].Type != order.EventRefundRequested || !events[0].Amount.Equal(dec("5")) {
		t.Fatalf("the unit for what is left: %+v %v", events, err)
	}
	if _, err := o.ApplyCallback(order.Callback{ID: "E-2", Type: rules.CallbackRefundSucceeded, OrderID: "O-1", PaymentID: "P-1",
		RefundID: "R-2", Amount: dec("5"), Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	if o.Status != order.StatusRefunded {
		t.Fatalf("status %s, want REFUNDED", o.Status)
	}
	version := o.Version
	events, err = o.RequestRefund(order.RefundRequest{ID: "R-3", Items: []order.Line{line("SKU-1", 1)}})
	if err != nil || len(events) != 1 || events[0].Type != order.EventRefunded || !events[0].Amount.IsZero() ||
		events[0].Version != version+1 || len(events[0].Items) != 1 {
		t.Fatalf("the last unit for nothing: %+v %v", events, err)
	}
	r := o.Refund("R-3")
	if o.Status != order.StatusRefunded || r == nil || r.Status != order.RefundSucceeded || !r.Amount.IsZero() ||
		!o.RefundedAmount().Equal(dec("80")) || len(o.ReturnedItems()) != 1 || o.ReturnedItems()[0].Quantity != 2 {
		t.Fatalf("order %s refunded %s returned %v, refund %+v", o.Status, o.RefundedAmount(), o.ReturnedItems(), r)
	}
	if _, err := o.RequestRefund(order.RefundRequest{ID: "R-4", Items: []order.Line{line("SKU-1", 1)}}); err == nil {
		t.Fatal("a third unit of two came back")
	}
	if _, err := o.RequestRefund(order.RefundRequest{ID: "R-5", Amount: dec("1")}); err == nil {
		t.Fatal("a refunded order gave money back again")
	}
}

// TestShortageWaitsForARefundInFlight: a shortage reported while a
// customer's refund waits for the payment service is refused with
// ErrRefundInFlight (its sender delivers it again), and nothing changes.
func TestShortageWaitsForARefundInFlight(t *testing.T) {
	o := at(t, order.StatusRefunding)
	events, err := o.ApplyCallback(shortage("P-1"))
	if !errors.Is(err, order.ErrRefundInFlight) || len(events) != 0 || o.Reason != "" || o.Version != 4 {
		t.Fatalf("%+v %v, order %s v%d reason %q", events, err, o.Status, o.Version, o.Reason)
	}
}

func TestCloneSharesNothing(t *testing.T) {
	o := at(t, order.StatusRefunding)
	c := o.Clone()
	c.Refunds[0].Status = order.RefundSucceeded
	c.Items[0].Quantity = 9
	c.Refunds = append(c.Refunds, order.Refund{ID: "R-9"})
	if o.Refunds[0].Status != order.RefundRequested || o.Items[0].Quantity != 2 || len(o.Refunds) != 1 {
		t.Fatalf("changing the clone changed the original: %+v", o)
	}
}

func TestFullLifecycleVersions(t *testing.T) {
	o := at(t, order.StatusCreated)
	var refundID string
	steps := []func() ([]order.Event, error){
		o.Checkout,
		func() ([]order.Event, error) {
			return o.ApplyCallback(order.Callback{ID: "E-1", Type: rules.CallbackPaymentSucceeded, OrderID: "O-1", PaymentID: "P-1", Amount: dec("80"), Currency: "CNY"})
		},
		func() ([]order.Event, error) {
			events, err := o.RequestRefund(order.RefundRequest{ID: "R-1", Items: []order.Line{line("SKU-1", 2)}})
			refundID = "R-1"
			return events, err
		},
		func() ([]order.Event, error) {
			return o.ApplyCallback(order.Callback{ID: "E-2", Type: rules.CallbackRefundSucceeded, OrderID: "O-1", PaymentID: "P-1", RefundID: refundID, Amount: dec("80"), Currency: "CNY"})
		},
	}
	want := []order.EventType{order.EventCheckedOut, order.EventPaid, order.EventRefundRequested, order.EventRefunded}
	for i, step := range steps {
		events, err := step()
		if err != nil || len(events) != 1 || events[0].Type != want[i] || events[0].Version != int64(i+2) {
			t.Fatalf("step %d: %+v %v", i, events, err)
		}
	}
	if o.Status != order.StatusRefunded || o.PaymentID != "P-1" || !o.RefundedAmount().Equal(dec("80")) {
		t.Fatalf("final order %+v", o)
	}
}

func TestSameContent(t *testing.T) {
	base := func() *order.Order {
		o, err := order.New("O-1", "C-1", "CNY", []order.Item{
			{SKU: "A", Quantity: 1, UnitPrice: dec("1.00")}, {SKU: "B", Quantity: 2, UnitPrice: dec("2.00")},
		})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	tests := []struct {
		name   string
		change func(*order.Order)
		want   bool
	}{
		{"identical", func(*order.Order) {}, true},
		{"items reordered", func(o *order.Order) { o.Items[0], o.Items[1] = o.Items[1], o.Items[0] }, true},
		{"price written differently", func(o *order.Order) { o.Items[0].UnitPrice = dec("1") }, true},
		{"later status", func(o *order.Order) { o.Status, o.Version = order.StatusPaid, 3 }, true},
		{"other customer", func(o *order.Order) { o.CustomerID = "C-2" }, false},
		{"other currency", func(o *order.Order) { o.Currency = "USD" }, false},
		{"other quantity", func(o *order.Order) { o.Items[1].Quantity = 3 }, false},
		{"other price", func(o *order.Order) { o.Items[1].UnitPrice = dec("2.01") }, false},
		{"other sku", func(o *order.Order) { o.Items[1].SKU = "C" }, false},
		{"fewer items", func(o *order.Order) { o.Items = o.Items[:1] }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := base()
			tt.change(other)
			if got := base().SameContent(other); got != tt.want {
				t.Fatalf("SameContent = %v, want %v", got, tt.want)
			}
		})
	}
}
