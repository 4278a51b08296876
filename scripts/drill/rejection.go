package drill

import (
	"fmt"
	"net/url"
	"time"
)

// Tutorial: a business rejection (not enough stock, a refund above the
// payment) is an outcome, not a failure: recorded once, never retried,
// never dead-lettered (docs/design.md, Error classes).

// noDeadLetters checks service holds no dead letter of orderID.
func (s *session) noDeadLetters(service, orderID string) {
	if dl := must(s.api.DeadLetters(s.ctx, service, orderID, "")); len(dl) != 0 {
		fail("%s dead-lettered %d messages of %s (first: %s %s), want none", service, len(dl), orderID, dl[0].ErrorClass, dl[0].FailureReason)
	}
}

func poisonInsufficientStock(s *session) string {
	const available, quantity = 1, 3
	o := s.placed("", quantity, "10.00", available)
	before := s.counts(retries, Inventory)
	start := time.Now()
	s.pay(o)
	s.waitUntil(o.id+": inventory REJECTED", func() (string, bool, error) {
		eff, err := s.readEffects(o.id)
		return "inventory " + eff.Inventory, eff.Inventory == "REJECTED", err
	})
	s.converged = time.Since(start)
	paid := s.orderEvent(o.id, "OrderPaid")
	if n := must(s.api.ProcessedEventCount(s.ctx, Inventory, paid.EventID)); n != 1 {
		fail("inventory holds %d dedup rows for %s, want 1 (the rejection recorded once)", n, paid.EventID)
	}
	st := s.stockIs(o.sku, available, 0, "after a rejected order")
	s.noRetries(before)
	s.noDeadLetters(Inventory, o.id)
	return fmt.Sprintf("%d wanted, %d in stock: inventory REJECTED once (1 dedup row), stock %d/%d, retries +0, DLQ 0",
		quantity, available, st.Available, st.Deducted)
}

func poisonRefundAbovePayment(s *session) string {
	const refund = "500.00"
	o := s.paidOrder("", 1, "10.00", seedStock)
	stockBefore := s.stock(o.sku)
	before := s.counts(retries, Payment)
	start := time.Now()
	var res commandResult
	check(s.api.Call(s.ctx, Order, "POST", "/orders/"+url.PathEscape(o.id)+"/refunds", map[string]string{"amount": refund}, &res))
	if res.BusinessCode != "SUCCESS" || res.Status != "REFUNDING" {
		fail("refund request of %s answered %s %s, want SUCCESS REFUNDING", refund, res.BusinessCode, res.Status)
	}
	s.waitOrder(o.id, "PAID", 5)
	s.converged = time.Since(start)
	s.orderEvent(o.id, "OrderRefundRejected")
	pay := s.payment(o.id)
	if pay.Status != "SUCCEEDED" || pay.Refunded != "0.00" {
		fail("payment after the rejected refund: %s, refunded %s; want SUCCEEDED, 0.00", pay.Status, pay.Refunded)
	}
	stockAfter := s.stock(o.sku)
	if stockAfter != stockBefore {
		fail("a rejected refund moved the stock: %+v -> %+v", stockBefore, stockAfter)
	}
	s.noRetries(before)
	s.noDeadLetters(Payment, o.id)
	return fmt.Sprintf("paid %s, asked %s back: payment rejected it (SUCCEEDED, refunded %s), order PAID v5 with OrderRefundRejected, stock %d/%d unchanged, retries +0, DLQ 0",
		pay.Amount, refund, pay.Refunded, stockAfter.Available, stockAfter.Deducted)
}
