package order_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"
	"pgregory.net/rapid"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// refundModel is what a paid order should say after a sequence of refund
// requests, payment decisions and shortage reports, kept independently of
// the aggregate: the money that came back, the goods that came with it, the
// status and the version.
type refundModel struct {
	amount   decimal.Decimal
	ordered  map[string]int
	prices   map[string]decimal.Decimal
	refunded decimal.Decimal
	returned map[string]int
	status   order.Status
	version  int64
	// pending is the refund the payment service has not decided yet.
	pending *modelRefund
	// shortage is set once the inventory reported the order out of stock.
	shortage bool
}

type modelRefund struct {
	id     string
	amount decimal.Decimal
	items  []order.Line
}

// left is what is left of the order's money.
func (m *refundModel) left() decimal.Decimal { return m.amount.Sub(m.refunded) }

// returnable reports whether lines fit in what is left to return.
func (m *refundModel) returnable(lines []order.Line) bool {
	for _, l := range lines {
		if m.returned[l.SKU]+l.Quantity > m.ordered[l.SKU] {
			return false
		}
	}
	return true
}

func (m *refundModel) price(lines []order.Line) decimal.Decimal {
	sum := decimal.Zero
	for _, l := range lines {
		sum = sum.Add(m.prices[l.SKU].Mul(decimal.NewFromInt(int64(l.Quantity))))
	}
	return sum
}

func (m *refundModel) giveBack(amount decimal.Decimal, lines []order.Line) {
	m.refunded = m.refunded.Add(amount)
	for _, l := range lines {
		m.returned[l.SKU] += l.Quantity
	}
}

// paymentStandIn restates the payment service's refund rule
// (services/payment/internal/domain/payment, Payment.Refund): a refund is
// made if it is positive and at most what is left of the payment, else it
// is rejected with REFUND_EXCEEDS_PAYMENT. The order's domain may not
// import the payment service's, so the rule is restated here, and
// services/payment tests the rule itself.
type paymentStandIn struct {
	id       string
	amount   decimal.Decimal
	refunded decimal.Decimal
}

func (p *paymentStandIn) decide(orderID string, r order.Refund, callbackID string) order.Callback {
	cb := order.Callback{ID: callbackID, OrderID: orderID, PaymentID: p.id, RefundID: r.ID, Amount: r.Amount, Currency: r.Currency}
	if !r.Amount.IsPositive() || r.Amount.GreaterThan(p.amount.Sub(p.refunded)) {
		cb.Type, cb.Reason = rules.CallbackRefundRejected, "REFUND_EXCEEDS_PAYMENT"
		return cb
	}
	p.refunded = p.refunded.Add(r.Amount)
	cb.Type = rules.CallbackRefundSucceeded
	return cb
}

// TestRandomRefundSequencesKeepTheBooks drives a paid order through random
// sequences of refunds (money alone, goods alone, both; partial, full, more
// than is left; goods returned after their money came back; repeats),
// payment decisions, repeated callbacks and shortage reports, and checks
// the order against refundModel after every step: its status, the money
// that came back (the sum of succeeded refunds, never more than was paid
// and always what the payment says), the goods returned (never more than
// ordered), one version per event and each event's type and amount.
// Each round is rapid's default 100 sequences (-rapid.checks=N sets it).
func TestRandomRefundSequencesKeepTheBooks(t *testing.T) {
	for round := range 5 {
		t.Run("round "+strconv.Itoa(round), rapid.MakeCheck(refundSequence))
	}
}

func refundSequence(t *rapid.T) {
	skus := rapid.IntRange(1, 3).Draw(t, "skus")
	var lines []order.Item
	for i := range skus {
		lines = append(lines, order.Item{
			SKU:       "SKU-" + strconv.Itoa(i),
			Quantity:  rapid.IntRange(1, 3).Draw(t, "quantity"),
			UnitPrice: decimal.New(int64(rapid.IntRange(1, 5000).Draw(t, "cents")), -2),
		})
	}
	o, err := order.New("O-1", "C-1", "CNY", lines)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := o.Checkout(); err != nil {
		t.Fatalf("Checkout: %v", err)
	}
	pay := &paymentStandIn{id: "P-1", amount: o.Amount, refunded: decimal.Zero}
	if _, err := o.ApplyCallback(order.Callback{ID: "cb-pay", Type: rules.CallbackPaymentSucceeded, OrderID: o.ID,
		PaymentID: pay.id, Amount: o.Amount, Currency: "CNY"}); err != nil {
		t.Fatalf("pay: %v", err)
	}
	m := &refundModel{amount: o.Amount, ordered: map[string]int{}, prices: map[string]decimal.Decimal{},
		refunded: decimal.Zero, returned: map[string]int{}, status: order.StatusPaid, version: o.Version}
	for _, it := range lines {
		m.ordered[it.SKU], m.prices[it.SKU] = it.Quantity, it.UnitPrice
	}
	var lastCallback *order.Callback
	steps := rapid.IntRange(1, 25).Draw(t, "steps")
	for step := range steps {
		var events []order.Event
		var err error
		var want []order.Event
		var wantErr bool
		switch rapid.SampledFrom([]string{"request", "request", "request", "decide", "decide", "again", "repeat", "shortage"}).Draw(t, "action") {
		case "request":
			r := drawRefund(t, m, step)
			events, err = o.RequestRefund(r)
			want, wantErr = m.request(r)
		case "decide":
			p := o.PendingRefund()
			if p == nil {
				continue
			}
			cb := pay.decide(o.ID, *p, "cb-"+strconv.Itoa(step))
			lastCallback = &cb
			events, err = o.ApplyCallback(cb)
			want, wantErr = m.decide(cb)
		case "again":
			// A callback delivered again changes nothing.
			if lastCallback == nil {
				continue
			}
			events, err = o.ApplyCallback(*lastCallback)
		case "repeat":
			// A refund asked again under its id changes nothing,
			// whatever it asks now.
			if len(o.Refunds) == 0 {
				continue
			}
			id := rapid.SampledFrom(o.Refunds).Draw(t, "repeated").ID
			events, err = o.RequestRefund(order.RefundRequest{ID: id, Amount: decimal.New(1, -2)})
		case "shortage":
			events, err = o.ApplyCallback(order.Callback{ID: "cb-stock", Type: rules.CallbackStockRejected, OrderID: o.ID,
				PaymentID: pay.id, Amount: o.Amount, Currency: "CNY", Reason: "INSUFFICIENT_STOCK"})
			want, wantErr = m.reportShortage()
		}
		if (err != nil) != wantErr {
			t.Fatalf("step %d: error %v, want an error: %v", step, err, wantErr)
		}
		checkEvents(t, step, events, want)
		checkOrder(t, step, o, m, pay)
	}
}

// drawRefund draws a refund request: goods (some of the order's SKUs, at
// times more than is left of them), an amount (none for the goods' price,
// a random one, all that is left, a cent more than is left) or both.
func drawRefund(t *rapid.T, m *refundModel, step int) order.RefundRequest {
	r := order.RefundRequest{ID: "R-" + strconv.Itoa(step)}
	for _, sku := range slices.Sorted(maps.Keys(m.ordered)) {
		if rapid.Bool().Draw(t, "return "+sku) {
			r.Items = append(r.Items, order.Line{SKU: sku, Quantity: rapid.IntRange(1, m.ordered[sku]-m.returned[sku]+1).Draw(t, "of "+sku)})
		}
	}
	amounts := []string{"random", "left", "more than left"}
	if len(r.Items) > 0 {
		amounts = append(amounts, "price of the goods", "price of the goods")
	}
	switch rapid.SampledFrom(amounts).Draw(t, "amount") {
	case "random":
		r.Amount = decimal.New(int64(rapid.IntRange(1, int(m.amount.Shift(2).IntPart())).Draw(t, "cents")), -2)
	case "left":
		r.Amount = m.left()
	case "more than left":
		r.Amount = m.left().Add(decimal.New(1, -2))
	}
	if rapid.Bool().Draw(t, "by an operator") {
		r.Reason, r.RequestedBy = "GOODWILL", "alice"
	}
	return r
}

// request is what RequestRefund should do with r.
func (m *refundModel) request(r order.RefundRequest) ([]order.Event, bool) {
	amount := r.Amount
	if amount.IsZero() && len(r.Items) > 0 {
		amount = decimal.Min(m.price(r.Items), m.left())
		if !amount.IsPositive() {
			// Goods whose money is back already: a refund of no money,
			// made at once.
			if m.status != order.StatusRefunded || !m.returnable(r.Items) {
				return nil, true
			}
			m.giveBack(decimal.Zero, r.Items)
			m.version++
			return []order.Event{{Type: order.EventRefunded, RefundID: r.ID, Amount: decimal.Zero, Items: r.Items}}, false
		}
	}
	if !amount.IsPositive() || (m.status != order.StatusPaid && m.status != order.StatusPartiallyRefunded) || !m.returnable(r.Items) {
		return nil, true
	}
	m.pending = &modelRefund{id: r.ID, amount: amount, items: r.Items}
	m.status = order.StatusRefunding
	m.version++
	return []order.Event{{Type: order.EventRefundRequested, RefundID: r.ID, Amount: amount, Items: r.Items}}, false
}

// decide is what the payment service's answer to the pending refund should
// do.
func (m *refundModel) decide(cb order.Callback) ([]order.Event, bool) {
	p := m.pending
	m.pending = nil
	m.version++
	if cb.Type == rules.CallbackRefundRejected {
		m.status = order.StatusPaid
		if m.refunded.IsPositive() {
			m.status = order.StatusPartiallyRefunded
		}
		return []order.Event{{Type: order.EventRefundRejected, RefundID: p.id, Amount: p.amount}}, false
	}
	m.giveBack(p.amount, p.items)
	switch {
	case p.id == rules.ShortageRefundID("O-1"):
		m.status = order.StatusCancelled
	case m.refunded.Equal(m.amount):
		m.status = order.StatusRefunded
	default:
		m.status = order.StatusPartiallyRefunded
	}
	return []order.Event{{Type: order.EventRefunded, RefundID: p.id, Amount: p.amount, Items: p.items}}, false
}

// reportShortage is what a STOCK_REJECTED callback should do: ask for all
// the money still held, once.
func (m *refundModel) reportShortage() ([]order.Event, bool) {
	switch {
	case m.shortage, m.status == order.StatusRefunded:
		return nil, false
	case m.status == order.StatusRefunding, m.status == order.StatusCancelled:
		return nil, true
	}
	m.shortage = true
	id := rules.ShortageRefundID("O-1")
	m.pending = &modelRefund{id: id, amount: m.left()}
	m.status = order.StatusRefunding
	m.version++
	return []order.Event{{Type: order.EventRefundRequested, RefundID: id, Amount: m.left()}}, false
}

func checkEvents(t *rapid.T, step int, got, want []order.Event) {
	if len(got) != len(want) {
		t.Fatalf("step %d: events %+v, want %+v", step, got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.RefundID != w.RefundID || !g.Amount.Equal(w.Amount) || fmt.Sprint(lines(g.Items)) != fmt.Sprint(lines(w.Items)) {
			t.Fatalf("step %d: event %+v, want %+v", step, g, w)
		}
	}
}

// lines drops the difference between no goods and an empty list.
func lines(ls []order.Line) []order.Line {
	if len(ls) == 0 {
		return nil
	}
	return ls
}

func checkOrder(t *rapid.T, step int, o *order.Order, m *refundModel, pay *paymentStandIn) {
	if o.Status != m.status {
		t.Fatalf("step %d: status %s, want %s", step, o.Status, m.status)
	}
	if o.Version != m.version {
		t.Fatalf("step %d: version %d, want %d", step, o.Version, m.version)
	}
	refunded := o.RefundedAmount()
	if !refunded.Equal(m.refunded) || refunded.GreaterThan(o.Amount) {
		t.Fatalf("step %d: refunded %s of %s, want %s", step, refunded, o.Amount, m.refunded)
	}
	if !refunded.Equal(pay.refunded) {
		t.Fatalf("step %d: order says %s refunded, the payment %s", step, refunded, pay.refunded)
	}
	returned := map[string]int{}
	for _, l := range o.ReturnedItems() {
		returned[l.SKU] = l.Quantity
		if l.Quantity > m.ordered[l.SKU] {
			t.Fatalf("step %d: %d of %s returned, %d ordered", step, l.Quantity, l.SKU, m.ordered[l.SKU])
		}
	}
	want := map[string]int{}
	for sku, n := range m.returned {
		if n > 0 {
			want[sku] = n
		}
	}
	if !maps.Equal(returned, want) {
		t.Fatalf("step %d: returned %v, want %v", step, returned, want)
	}
	if p := o.PendingRefund(); (p == nil) != (m.pending == nil) || (p != nil && (p.ID != m.pending.id || !p.Amount.Equal(m.pending.amount))) {
		t.Fatalf("step %d: pending refund %+v, want %+v", step, p, m.pending)
	}
}
