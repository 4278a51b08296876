package reconciliation_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"
	"pgregory.net/rapid"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// story is an order the services agree on, as generated: its facts and
// what kind of order it is.
type story struct {
	kind  string
	facts rec.Facts
}

// The kinds of order generated.
const (
	storyPaid       = "paid, refunded in parts"
	storyOutOfStock = "out of stock, compensated"
	storyReturned   = "cancelled, its payment returned"
)

// agreeingFacts draws an order and the facts every service holds about it
// once converged, computed by the rules the services agreed on
// (docs/decisions.md, Business rules): a paid order refunded in parts
// (money alone, goods with their money, goods after their money, refunds
// rejected), a paid order the stock could not cover and whose money went
// back, or an order cancelled before its payment arrived and the payment
// returned.
func agreeingFacts(t *rapid.T) story {
	var items []rec.OrderLine
	amount := decimal.Zero
	for i := range rapid.IntRange(1, 3).Draw(t, "skus") {
		it := rec.OrderLine{Line: rec.Line{SKU: "SKU-" + strconv.Itoa(i), Quantity: rapid.IntRange(1, 3).Draw(t, "quantity")},
			UnitPrice: decimal.New(int64(rapid.IntRange(1, 5000).Draw(t, "cents")), -2)}
		items = append(items, it)
		amount = amount.Add(it.UnitPrice.Mul(decimal.NewFromInt(int64(it.Quantity))))
	}
	var deducted []rec.Line
	for _, it := range items {
		deducted = append(deducted, it.Line)
	}
	kind := rapid.SampledFrom([]string{storyPaid, storyPaid, storyOutOfStock, storyReturned}).Draw(t, "kind")
	f := rec.Facts{
		Order: rec.Order{ID: "O-1", Found: true, Status: rec.StatusPaid, Version: 3, Amount: amount, Currency: "CNY",
			CustomerID: "C-1", Items: items, PaymentID: "P-1", RefundedAmount: decimal.Zero, UpdatedAt: t0,
			Events: []rec.OutboxRow{sent("E-1", "OrderCreated", 1), sent("E-2", "OrderCheckedOut", 2), sent("E-3", "OrderPaid", 3)}},
		Payment: rec.Payment{Found: true, PaymentID: "P-1", Amount: amount, Currency: "CNY", Status: rec.PaymentSucceeded,
			Refunded: decimal.Zero, Outbox: []rec.OutboxRow{sent("C-1", "PAYMENT_SUCCEEDED", 2)}},
		Inventory:     rec.Inventory{Status: rec.InventoryDeducted, Items: deducted},
		Points:        rec.Points{Entries: []rec.PointsEntry{{EventID: "E-3", Type: "EARN", Points: rules.PointsFor(amount, decimal.Zero), Amount: amount}}},
		Notifications: rec.Notifications{Sent: []rec.Notice{{EventID: "E-3", Kind: "ORDER_PAID"}}},
	}
	switch kind {
	case storyReturned:
		f.Order.Status, f.Order.PaymentID, f.Order.Version = rec.StatusCancelled, "", 5
		f.Order.Events = []rec.OutboxRow{sent("E-1", "OrderCreated", 1), sent("E-2", "OrderCheckedOut", 2),
			sent("E-3", "OrderCancelled", 3), sent("E-4", "OrderPaymentRejected", 4), sent("E-5", "OrderPaymentReturned", 5)}
		f.Order.Refunds = []rec.Refund{{ID: rules.ReturnRefundID("P-1"), Kind: rec.KindPaymentReturn, PaymentID: "P-1", Amount: amount,
			Currency: "CNY", Status: rec.RefundSucceeded, Reason: "ORDER_CANCELLED"}}
		f.Payment.Refunded, f.Payment.Status = amount, rec.PaymentRefunded
		f.Payment.Refunds = []rec.PaymentRefund{{ID: rules.ReturnRefundID("P-1"), Amount: amount, Status: "SUCCEEDED"}}
		f.Inventory = rec.Inventory{Status: rec.InventoryNone}
		f.Points = rec.Points{}
		f.Notifications = rec.Notifications{Sent: []rec.Notice{{EventID: "E-5", Kind: "PAYMENT_RETURNED"}}}
		return story{kind: kind, facts: f}
	case storyOutOfStock:
		f.Inventory = rec.Inventory{Status: rec.InventoryRejected, Reason: "INSUFFICIENT_STOCK", Items: deducted}
	}

	returned := map[string]int{}
	for i := range rapid.IntRange(0, 4).Draw(t, "refunds") {
		id := "R-" + strconv.Itoa(i)
		left := amount.Sub(f.Order.RefundedAmount)
		var goods []rec.Line
		if kind == storyPaid {
			for _, it := range items {
				if n := it.Quantity - returned[it.SKU]; n > 0 && rapid.Bool().Draw(t, "return "+it.SKU) {
					goods = append(goods, rec.Line{SKU: it.SKU, Quantity: rapid.IntRange(1, n).Draw(t, "of "+it.SKU)})
				}
			}
		}
		var money decimal.Decimal
		switch {
		case !left.IsPositive() && len(goods) == 0:
			continue
		case !left.IsPositive():
			money = decimal.Zero // goods whose money came back before
		case rapid.IntRange(0, 3).Draw(t, "rejected") == 0:
			rejectRefund(&f, id, left.Add(decimal.New(1, -2)))
			continue
		case rapid.Bool().Draw(t, "the rest"):
			money = left
		default:
			money = decimal.New(rapid.Int64Range(1, left.Shift(2).IntPart()).Draw(t, "refund cents"), -2)
		}
		for _, g := range goods {
			returned[g.SKU] += g.Quantity
		}
		succeedRefund(&f, id, money, goods, "")
	}
	if kind == storyOutOfStock {
		if left := amount.Sub(f.Order.RefundedAmount); left.IsPositive() {
			succeedRefund(&f, rules.ShortageRefundID("O-1"), left, nil, rules.ReasonOutOfStock)
			f.Order.Status = rec.StatusCancelled
		}
	}
	for _, it := range items {
		if n := returned[it.SKU]; n > 0 {
			f.Order.ReturnedItems = append(f.Order.ReturnedItems, rec.Line{SKU: it.SKU, Quantity: n})
		}
	}
	if kind == storyPaid {
		f.Inventory.Restocked = f.Order.ReturnedItems
		switch back := len(f.Order.ReturnedItems); {
		case back == 0:
		case fmt.Sprint(f.Order.ReturnedItems) == fmt.Sprint(deducted):
			f.Inventory.Status = rec.InventoryRestocked
		default:
			f.Inventory.Status = rec.InventoryPartiallyRestocked
		}
	}
	return story{kind: kind, facts: f}
}

// succeedRefund records a refund of money (zero: goods whose money came
// back before, v3) and goods in every service, as each records it.
func succeedRefund(f *rec.Facts, id string, money decimal.Decimal, goods []rec.Line, reason string) {
	o := &f.Order
	before := o.RefundedAmount
	if money.IsPositive() {
		o.Version++
		o.Events = append(o.Events, sent("E-"+id+"-req", "OrderRefundRequested", o.Version))
		f.Payment.Refunds = append(f.Payment.Refunds, rec.PaymentRefund{ID: id, Amount: money, Status: "SUCCEEDED"})
	}
	o.Version++
	o.Events = append(o.Events, sent("E-"+id, "OrderRefunded", o.Version))
	o.Refunds = append(o.Refunds, rec.Refund{ID: id, Kind: rec.KindRefund, PaymentID: "P-1", Amount: money, Currency: "CNY",
		Items: goods, Status: rec.RefundSucceeded, Reason: reason})
	o.RefundedAmount = o.RefundedAmount.Add(money)
	o.Status = rec.StatusPartiallyRefunded
	if o.RefundedAmount.Equal(o.Amount) {
		o.Status = rec.StatusRefunded
	}
	f.Payment.Refunded = o.RefundedAmount
	f.Payment.Status = rec.PaymentPartiallyRefunded
	if o.Status == rec.StatusRefunded {
		f.Payment.Status = rec.PaymentRefunded
	}
	f.Points.Entries = append(f.Points.Entries, rec.PointsEntry{EventID: "E-" + id, Type: "REVERSAL",
		Points: rules.PointsFor(o.Amount, o.RefundedAmount) - rules.PointsFor(o.Amount, before), Amount: money})
	f.Notifications.Sent = append(f.Notifications.Sent, rec.Notice{EventID: "E-" + id, Kind: "ORDER_REFUNDED"})
}

// rejectRefund records a refund the payment service rejected: asked and
// refused, the customer told, nothing else moved.
func rejectRefund(f *rec.Facts, id string, money decimal.Decimal) {
	o := &f.Order
	o.Events = append(o.Events, sent("E-"+id+"-req", "OrderRefundRequested", o.Version+1), sent("E-"+id, "OrderRefundRejected", o.Version+2))
	o.Version += 2
	o.Refunds = append(o.Refunds, rec.Refund{ID: id, Kind: rec.KindRefund, PaymentID: "P-1", Amount: money, Currency: "CNY",
		Status: rec.RefundRejected, Reason: "REFUND_EXCEEDS_PAYMENT"})
	f.Payment.Refunds = append(f.Payment.Refunds, rec.PaymentRefund{ID: id, Amount: money, Status: "REJECTED", Reason: "REFUND_EXCEEDS_PAYMENT"})
	f.Notifications.Sent = append(f.Notifications.Sent, rec.Notice{EventID: "E-" + id, Kind: "REFUND_REJECTED"})
}

// breakage is one fact broken and the finding it must give.
type breakage struct {
	name    string
	kind    rec.Kind
	service string
	// fits reports whether the facts hold the fact to break.
	fits func(rec.Facts) bool
	// apply breaks it.
	apply func(*rapid.T, *rec.Facts)
}

func paidOrder(f rec.Facts) bool   { return f.Order.Paid() }
func unpaidOrder(f rec.Facts) bool { return !f.Order.Paid() }
func always(rec.Facts) bool        { return true }

// breakages are the facts a test may break, one at a time.
func breakages() []breakage {
	return []breakage{
		{"a ledger entry dropped", rec.MissingEffect, rec.ServicePoints,
			func(f rec.Facts) bool { return len(movedMoney(f)) > 0 },
			func(t *rapid.T, f *rec.Facts) {
				// The earn, or a reversal that gave money back.
				i := rapid.SampledFrom(movedMoney(*f)).Draw(t, "dropped entry")
				f.Points.Entries = append(f.Points.Entries[:i:i], f.Points.Entries[i+1:]...)
			}},
		{"points for an order never paid", rec.ExtraEffect, rec.ServicePoints, unpaidOrder,
			func(_ *rapid.T, f *rec.Facts) {
				f.Points.Entries = []rec.PointsEntry{{EventID: "E-x", Type: "EARN", Points: 1, Amount: f.Order.Amount}}
			}},
		{"the payment's refunded amount changed", rec.AmountMismatch, rec.ServicePayment, paidOrder,
			func(t *rapid.T, f *rec.Facts) {
				cent := decimal.New(1, -2)
				if f.Payment.Refunded.IsPositive() && rapid.Bool().Draw(t, "less") {
					cent = cent.Neg()
				}
				if f.Payment.Refunded.Add(cent).GreaterThan(f.Payment.Amount) {
					cent = cent.Neg()
				}
				f.Payment.Refunded = f.Payment.Refunded.Add(cent)
			}},
		{"the returned payment only partly returned", rec.PaymentForUnpayableOrder, rec.ServicePayment, unpaidOrder,
			func(t *rapid.T, f *rec.Facts) {
				f.Payment.Refunded = decimal.New(rapid.Int64Range(0, f.Payment.Amount.Shift(2).IntPart()-1).Draw(t, "returned cents"), -2)
				f.Payment.Status = rec.PaymentPartiallyRefunded
				if f.Payment.Refunded.IsZero() {
					f.Payment.Status = rec.PaymentSucceeded
				}
			}},
		{"a restock dropped", rec.MissingEffect, rec.ServiceInventory,
			func(f rec.Facts) bool {
				return len(f.Inventory.Restocked) > 0 && f.Inventory.Status != rec.InventoryRejected
			},
			func(t *rapid.T, f *rec.Facts) {
				restocked := append([]rec.Line(nil), f.Inventory.Restocked...)
				restocked[rapid.IntRange(0, len(restocked)-1).Draw(t, "restock")].Quantity--
				f.Inventory.Restocked = restocked
			}},
		{"a unit restocked that never came back", rec.ExtraEffect, rec.ServiceInventory,
			func(f rec.Facts) bool {
				return f.Inventory.Status != rec.InventoryRejected && f.Inventory.Status != rec.InventoryNone
			},
			func(t *rapid.T, f *rec.Facts) {
				sku := rapid.SampledFrom(f.Order.Items).Draw(t, "restocked").SKU
				f.Inventory.Restocked = append(append([]rec.Line(nil), f.Inventory.Restocked...), rec.Line{SKU: sku, Quantity: 1})
			}},
		{"stock deducted for an order never paid", rec.ExtraEffect, rec.ServiceInventory, unpaidOrder,
			func(_ *rapid.T, f *rec.Facts) {
				f.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{f.Order.Items[0].Line}}
			}},
		{"an extra notification", rec.ExtraEffect, rec.ServiceNotification, always,
			func(t *rapid.T, f *rec.Facts) {
				n := rapid.SampledFrom(f.Notifications.Sent).Draw(t, "told twice")
				f.Notifications.Sent = append(append([]rec.Notice(nil), f.Notifications.Sent...), rec.Notice{EventID: n.EventID + "-again", Kind: n.Kind})
			}},
		{"a notification dropped", rec.MissingEffect, rec.ServiceNotification, always,
			func(t *rapid.T, f *rec.Facts) {
				i := rapid.IntRange(0, len(f.Notifications.Sent)-1).Draw(t, "not told")
				f.Notifications.Sent = append(f.Notifications.Sent[:i:i], f.Notifications.Sent[i+1:]...)
			}},
	}
}

// movedMoney returns the indexes of the ledger entries that moved money.
func movedMoney(f rec.Facts) []int {
	var out []int
	for i, e := range f.Points.Entries {
		if e.Amount.IsPositive() {
			out = append(out, i)
		}
	}
	return out
}

// TestCompareFindsExactlyTheBrokenFact generates facts the services agree
// on for random orders (paid and refunded in parts, with goods, goods after
// their money and rejected refunds; out of stock and compensated;
// cancelled with the payment returned) and checks Compare finds nothing;
// then it breaks exactly one fact and checks Compare finds exactly one
// disagreement, of the right kind at the right service. A payment kept for
// an order that cannot take it is refunded by exactly what is left of it.
func TestCompareFindsExactlyTheBrokenFact(t *testing.T) {
	for round := range 5 {
		t.Run("round "+strconv.Itoa(round), rapid.MakeCheck(func(t *rapid.T) {
			s := agreeingFacts(t)
			if got := rec.Compare(s.facts, stuckBefore); len(got) != 0 {
				t.Fatalf("%s: facts the services agree on: %+v, want no finding\nfacts %+v", s.kind, got, s.facts)
			}
			var fit []breakage
			for _, b := range breakages() {
				if b.fits(s.facts) {
					fit = append(fit, b)
				}
			}
			b := rapid.SampledFrom(fit).Draw(t, "break")
			f := s.facts
			b.apply(t, &f)
			got := rec.Compare(f, stuckBefore)
			if len(got) != 1 || got[0].Kind != b.kind || got[0].Service != b.service {
				t.Fatalf("%s, %s: findings %+v, want one %s at %s\nfacts %+v", s.kind, b.name, got, b.kind, b.service, f)
			}
			if b.kind == rec.PaymentForUnpayableOrder {
				a := got[0].Action
				if left := f.Payment.Amount.Sub(f.Payment.Refunded); a.Type != rec.ActionRefund || !a.Amount.Equal(left) || a.PaymentID != f.Payment.PaymentID {
					t.Fatalf("%s: action %+v, want a REFUND of the %s left of %s", b.name, a, left, f.Payment.PaymentID)
				}
			}
		}))
	}
}
