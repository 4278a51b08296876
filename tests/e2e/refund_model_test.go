package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// e2eOrder is what one paid order should look like across the suite after
// the refunds made of it: the test's model, in cents and units, kept by the
// business rules (docs/decisions.md, The refund model).
type e2eOrder struct {
	id       string
	lines    []suiteapi.Item
	cents    map[string]int64 // unit price of each SKU
	paid     int64
	refunded int64
	returned map[string]int
	status   string
	version  int64
	// refunds and rejections count OrderRefunded and OrderRefundRejected:
	// each is one notification, and each OrderRefunded one points ledger
	// entry.
	refunds, rejections int
}

func money(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

func (o *e2eOrder) left() int64 { return o.paid - o.refunded }

// goodsLeft returns, for each SKU, how many units may still come back.
func (o *e2eOrder) goodsLeft() map[string]int {
	out := map[string]int{}
	for _, l := range o.lines {
		if n := l.Quantity - o.returned[l.SKU]; n > 0 {
			out[l.SKU] = n
		}
	}
	return out
}

func (o *e2eOrder) price(goods []suiteapi.Line) int64 {
	sum := int64(0)
	for _, g := range goods {
		sum += o.cents[g.SKU] * int64(g.Quantity)
	}
	return sum
}

// snapshot is what GET /orders/{id}/snapshot should say.
func (o *e2eOrder) snapshot() harness.Snapshot {
	payment := "PARTIALLY_REFUNDED"
	switch o.refunded {
	case 0:
		payment = "SUCCEEDED"
	case o.paid:
		payment = "REFUNDED"
	}
	inventory, all, some := "DEDUCTED", true, false
	for _, l := range o.lines {
		all = all && o.returned[l.SKU] == l.Quantity
		some = some || o.returned[l.SKU] > 0
	}
	switch {
	case all:
		inventory = "RESTOCKED"
	case some:
		inventory = "PARTIALLY_RESTOCKED"
	}
	return harness.Snapshot{Order: o.status, OrderVersion: o.version, Payment: payment, Inventory: inventory,
		PointsLedger: 1 + o.refunds, Notifications: 1 + o.refunds + o.rejections}
}

// refundStep is one refund the test asks for, and what the model expects
// of it.
type refundStep struct {
	name     string
	order    *e2eOrder
	amount   int64 // 0: the goods' price (or nothing, when their money is back)
	goods    []suiteapi.Line
	operator bool
}

// drawStep draws a refund of o: money alone, goods at their price, both,
// more than is left (the payment service rejects it), by the customer or an
// operator; and once all the money is back, goods alone for nothing.
func drawStep(rng *rand.Rand, o *e2eOrder) (refundStep, bool) {
	left := o.goodsLeft()
	var goods []suiteapi.Line
	for _, l := range o.lines {
		if n := left[l.SKU]; n > 0 && rng.IntN(2) == 0 {
			goods = append(goods, suiteapi.Line{SKU: l.SKU, Quantity: 1 + rng.IntN(n)})
		}
	}
	if o.left() == 0 {
		if len(goods) == 0 {
			return refundStep{}, false
		}
		return refundStep{name: "goods back after their money", order: o, goods: goods}, true
	}
	s := refundStep{order: o, operator: rng.IntN(3) == 0}
	who := "customer"
	if s.operator {
		who = "operator"
	}
	kinds := []string{"money alone", "more than is left"}
	if len(goods) > 0 {
		kinds = append(kinds, "goods at their price", "goods with an amount")
	}
	kind := kinds[rng.IntN(len(kinds))]
	switch kind {
	case "money alone":
		s.amount = 1 + rng.Int64N(o.left())
	case "more than is left":
		s.amount, s.goods = o.left()+1+rng.Int64N(1000), goods
	case "goods at their price":
		s.goods = goods
	case "goods with an amount":
		s.amount, s.goods = 1+rng.Int64N(o.left()), goods
	}
	s.name = fmt.Sprintf("%s: %s (%s, %v) of %s", who, kind, money(s.amount), s.goods, money(o.left()))
	return s, true
}

// apply moves the model as the refund should move the order.
func (s refundStep) apply() {
	o := s.order
	amount := s.amount
	if amount == 0 {
		amount = min(o.price(s.goods), o.left())
	}
	switch {
	case amount == 0:
		// Goods whose money came back: recorded at once, OrderRefunded v3.
		o.version++
	case amount > o.left():
		o.version += 2 // requested, rejected
		o.rejections++
		return
	default:
		o.version += 2 // requested, refunded
		o.refunded += amount
		o.status = "PARTIALLY_REFUNDED"
		if o.refunded == o.paid {
			o.status = "REFUNDED"
		}
	}
	o.refunds++
	for _, g := range s.goods {
		o.returned[g.SKU] += g.Quantity
	}
}

// TestRandomRefundsKeepEveryServiceInStep makes a seeded random sequence of
// refunds of two paid orders that share a SKU (customers' and operators';
// money, goods, both; more than is left; goods after their money) through
// the real suite, and after each one waits for the order's snapshot the
// model predicts and checks every service against the model: the order's
// and the payment's refunded amounts, the stock of every SKU, the points
// each order is worth (floor(paid − refunded)) and the customer's
// notifications. Reconciliation then finds nothing. A failure names the
// seed; rerunning with it (refundSeed) repeats the sequence.
func TestRandomRefundsKeepEveryServiceInStep(t *testing.T) {
	t.Parallel()
	const refundSeed = 0 // set to a failure's seed to repeat its sequence
	seed := uint64(refundSeed)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("refund sequence seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	s := harness.Start(t, harness.Options{})
	const stock = 10
	skus := []string{"SKU-M-SHARED", "SKU-M-1", "SKU-M-2"}
	for _, sku := range skus {
		s.SetStock(sku, stock)
	}
	var orders []*e2eOrder
	for i, own := range skus[1:] {
		o := &e2eOrder{id: fmt.Sprintf("O-M%d", i+1), cents: map[string]int64{}, returned: map[string]int{}, status: "PAID", version: 3}
		for _, sku := range []string{skus[0], own} {
			cents := 100 + rng.Int64N(2900)
			l := suiteapi.Item{SKU: sku, Quantity: 1 + rng.IntN(3), UnitPrice: money(cents)}
			o.lines, o.cents[sku], o.paid = append(o.lines, l), cents, o.paid+cents*int64(l.Quantity)
		}
		amount := s.CreateOrder(harness.Order{ID: o.id, Customer: "C-M", Currency: "CNY", Items: o.lines})
		if amount != money(o.paid) {
			t.Fatalf("order %s amounts to %s, want %s", o.id, amount, money(o.paid))
		}
		if code, out := s.Pay(o.id, amount, "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
			t.Fatalf("pay %s: %d %v", o.id, code, out)
		}
		orders = append(orders, o)
	}
	for _, o := range orders {
		s.WaitSnapshot(o.id, o.snapshot(), 30*time.Second)
	}
	check(t, s, "paid", orders, skus, stock)

	for i := range 4 + rng.IntN(3) {
		o := orders[rng.IntN(len(orders))]
		step, ok := drawStep(rng, o)
		if !ok {
			continue // nothing left of this order to refund
		}
		t.Logf("step %d, %s: %s", i, o.id, step.name)
		request(t, s, step)
		step.apply()
		s.WaitSnapshot(o.id, o.snapshot(), 30*time.Second)
		check(t, s, fmt.Sprintf("step %d (%s, %s; seed %d)", i, o.id, step.name, seed), orders, skus, stock)
	}
	ids := make([]string, 0, len(orders))
	for _, o := range orders {
		ids = append(ids, o.id)
	}
	if run := s.Reconcile(ids...); len(run.Findings) != 0 {
		t.Fatalf("reconciliation found %+v (seed %d)", run.Findings, seed)
	}
}

// request asks for the refund of step as its customer or an operator does,
// and requires it accepted.
func request(t *testing.T, s *harness.Suite, step refundStep) {
	t.Helper()
	o := step.order
	if step.operator {
		r := suiteapi.OperatorRefund{Items: step.goods, Reason: "goodwill"}
		if step.amount > 0 {
			r.Amount = money(step.amount)
		}
		a, err := s.API().OperatorRefund(context.Background(), o.id, "model@ops", r)
		if err != nil || a.BusinessCode != "SUCCESS" || a.Status != "REQUESTED" {
			t.Fatalf("%s: operator refund of %s: %+v %v", step.name, o.id, a, err)
		}
		return
	}
	body := map[string]any{}
	if step.amount > 0 {
		body["amount"] = money(step.amount)
	}
	if len(step.goods) > 0 {
		var items []any
		for _, g := range step.goods {
			items = append(items, map[string]any{"sku": g.SKU, "quantity": g.Quantity})
		}
		body["items"] = items
	}
	if out := s.JSON("order", "POST", "/orders/"+o.id+"/refunds", body, 200); out["businessCode"] != "SUCCESS" {
		t.Fatalf("%s: refund of %s: %v", step.name, o.id, out)
	}
}

// check compares every service with the model: money at the order and the
// payment, stock of every SKU over both orders, points and notifications.
func check(t *testing.T, s *harness.Suite, when string, orders []*e2eOrder, skus []string, stock int) {
	t.Helper()
	holds := map[string]int{}
	for _, o := range orders {
		order := s.JSON("order", "GET", "/orders/"+o.id, nil, 200)
		payment := s.JSON("payment", "GET", "/payments/orders/"+o.id, nil, 200)
		if order["refundedAmount"] != money(o.refunded) || payment["refunded"] != money(o.refunded) {
			t.Fatalf("%s: %s refunded %v at the order, %v at the payment, want %s", when, o.id, order["refundedAmount"], payment["refunded"], money(o.refunded))
		}
		ledger := s.JSON("points", "GET", "/points/orders/"+o.id, nil, 200)
		sum := 0.0
		for _, e := range ledger["entries"].([]any) {
			sum += e.(map[string]any)["points"].(float64)
		}
		if want := float64((o.paid - o.refunded) / 100); sum != want {
			t.Fatalf("%s: %s is worth %v points, want %v (paid %s, refunded %s)", when, o.id, sum, want, money(o.paid), money(o.refunded))
		}
		if n, want := s.NotificationCount(o.id), 1+o.refunds+o.rejections; n != want {
			t.Fatalf("%s: %s told %d times, want %d", when, o.id, n, want)
		}
		for _, l := range o.lines {
			holds[l.SKU] += l.Quantity - o.returned[l.SKU]
		}
	}
	for _, sku := range skus {
		if st := s.Inventory(sku); st.Available != stock-holds[sku] || st.Deducted != holds[sku] {
			t.Fatalf("%s: %s stock %+v, want %d available, %d deducted", when, sku, st, stock-holds[sku], holds[sku])
		}
	}
}
