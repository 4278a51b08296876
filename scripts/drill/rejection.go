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
func (s *session) noDeadLetters(service, orderID string) error {
	dl, err := s.api.DeadLetters(s.ctx, service, orderID, "")
	if err != nil {
		return err
	}
	if len(dl) != 0 {
		return fmt.Errorf("%s dead-lettered %d messages of %s (first: %s %s), want none", service, len(dl), orderID, dl[0].ErrorClass, dl[0].FailureReason)
	}
	return nil
}

func poisonInsufficientStock(s *session) (string, error) {
	const available, quantity = 1, 3
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, available); err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, quantity, "10.00")
	if err != nil {
		return "", err
	}
	before, err := s.retriesNow(Inventory)
	if err != nil {
		return "", err
	}
	start := time.Now()
	if err := s.pay(orderID, amount); err != nil {
		return "", err
	}
	var inv string
	if _, err := s.waitUntil(orderID+": inventory REJECTED", func() (bool, error) {
		eff, err := s.effects(orderID)
		inv = eff.Inventory
		return inv == "REJECTED", err
	}); err != nil {
		return "", fmt.Errorf("%w; inventory %s", err, inv)
	}
	s.converged = time.Since(start)
	paid, err := s.orderEvent(orderID, "OrderPaid")
	if err != nil {
		return "", err
	}
	if n, err := s.api.ProcessedEventCount(s.ctx, Inventory, paid.EventID); err != nil {
		return "", fmt.Errorf("inventory's dedup rows for %s: %w", paid.EventID, err)
	} else if n != 1 {
		return "", fmt.Errorf("inventory holds %d dedup rows for %s, want 1 (the rejection recorded once)", n, paid.EventID)
	}
	st, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	if st.Available != available || st.Deducted != 0 {
		return "", fmt.Errorf("a rejected order moved the stock of %s: %d/%d, want %d/0", sku, st.Available, st.Deducted, available)
	}
	if err := s.noRetries(before); err != nil {
		return "", err
	}
	if err := s.noDeadLetters(Inventory, orderID); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d wanted, %d in stock: inventory REJECTED once (1 dedup row), stock %d/%d, retries +0, DLQ 0",
		quantity, available, st.Available, st.Deducted), nil
}

func poisonRefundAbovePayment(s *session) (string, error) {
	const quantity, refund = 1, "500.00"
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, quantity, "10.00")
	if err != nil {
		return "", err
	}
	if err := s.pay(orderID, amount); err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", err
	}
	stockBefore, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	before, err := s.retriesNow(Payment)
	if err != nil {
		return "", err
	}
	start := time.Now()
	var res commandResult
	if err := s.api.Call(s.ctx, Order, "POST", "/orders/"+url.PathEscape(orderID)+"/refunds", map[string]string{"amount": refund}, &res); err != nil {
		return "", err
	}
	if res.BusinessCode != "SUCCESS" || res.Status != "REFUNDING" {
		return "", fmt.Errorf("refund request of %s answered %s %s, want SUCCESS REFUNDING", refund, res.BusinessCode, res.Status)
	}
	var o orderView
	if _, err := s.waitUntil(orderID+" back to PAID at v5", func() (bool, error) {
		var err error
		o, err = s.api.Order(s.ctx, orderID)
		return o.Status == "PAID" && o.Version == 5, err
	}); err != nil {
		return "", fmt.Errorf("%w; order %s v%d", err, o.Status, o.Version)
	}
	s.converged = time.Since(start)
	if _, err := s.orderEvent(orderID, "OrderRefundRejected"); err != nil {
		return "", err
	}
	var pay struct {
		Status   string `json:"status"`
		Amount   string `json:"amount"`
		Refunded string `json:"refunded"`
	}
	if err := s.api.Call(s.ctx, Payment, "GET", "/payments/orders/"+url.PathEscape(orderID), nil, &pay); err != nil {
		return "", err
	}
	if pay.Status != "SUCCEEDED" || pay.Refunded != "0.00" {
		return "", fmt.Errorf("payment after the rejected refund: %s, refunded %s; want SUCCEEDED, 0.00", pay.Status, pay.Refunded)
	}
	stockAfter, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	if stockAfter != stockBefore {
		return "", fmt.Errorf("a rejected refund moved the stock: %+v -> %+v", stockBefore, stockAfter)
	}
	if err := s.noRetries(before); err != nil {
		return "", err
	}
	if err := s.noDeadLetters(Payment, orderID); err != nil {
		return "", err
	}
	return fmt.Sprintf("paid %s, asked %s back: payment rejected it (SUCCEEDED, refunded %s), order PAID v5 with OrderRefundRejected, stock %d/%d unchanged, retries +0, DLQ 0",
		pay.Amount, refund, pay.Refunded, stockAfter.Available, stockAfter.Deducted), nil
}
