package payment_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"
	"pgregory.net/rapid"

	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// TestRandomRefundsNeverDrawMoreThanWasPaid draws random refunds (parts,
// the rest, more than is left) from a payment: a refund is made exactly
// when it is at most what is left, is otherwise rejected with
// REFUND_EXCEEDS_PAYMENT leaving the payment as it was, and the refunded
// total is the sum of the refunds made, never more than was paid. This is
// the rule the order service's refund model restates for its callbacks.
func TestRandomRefundsNeverDrawMoreThanWasPaid(t *testing.T) {
	for round := range 5 {
		t.Run("round "+strconv.Itoa(round), rapid.MakeCheck(func(t *rapid.T) {
			paidCents := rapid.Int64Range(1, 1_000_000).Draw(t, "paid cents")
			p := payment.New(payment.Request{OrderID: "O-1", Amount: decimal.New(paidCents, -2), Currency: "CNY"})
			made := int64(0)
			for i := range rapid.IntRange(1, 10).Draw(t, "refunds") {
				left := paidCents - made
				var cents int64
				switch rapid.SampledFrom([]string{"part", "rest", "more"}).Draw(t, "kind") {
				case "part":
					cents = rapid.Int64Range(1, paidCents).Draw(t, "cents")
				case "rest":
					cents = max(left, 1)
				case "more":
					cents = left + rapid.Int64Range(1, 100).Draw(t, "cents over")
				}
				before := p
				err := p.Refund(decimal.New(cents, -2), "CNY")
				if cents <= left {
					if err != nil {
						t.Fatalf("refund %d of %d cents with %d left: %v", i, cents, left, err)
					}
					made += cents
				} else {
					var rerr *payment.RefundError
					if !errors.As(err, &rerr) || rerr.Reason != payment.ReasonRefundExceedsPayment || p != before {
						t.Fatalf("refund %d of %d cents with %d left: error %v, payment %+v, want REFUND_EXCEEDS_PAYMENT and %+v", i, cents, left, err, p, before)
					}
				}
				want := payment.StatusPartiallyRefunded
				switch made {
				case 0:
					want = payment.StatusSucceeded
				case paidCents:
					want = payment.StatusRefunded
				}
				if !p.Refunded.Equal(decimal.New(made, -2)) || p.Refunded.GreaterThan(p.Amount) || p.Status != want {
					t.Fatalf("refund %d: refunded %s (%s) of %s, want %d cents (%s)", i, p.Refunded, p.Status, p.Amount, made, want)
				}
			}
		}))
	}
}
