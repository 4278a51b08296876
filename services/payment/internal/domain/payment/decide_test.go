package payment_test

import (
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// DecideRefund makes a refund that fits what is left of the payment and
// rejects any other, and says what the order service is told: always in
// the refund's currency, which is the payment's when the request names
// none, and not at all when neither names one.
func TestDecideRefund(t *testing.T) {
	paid := payment.Payment{ID: "P-1", OrderID: "O-1", Amount: dec("80.00"), Currency: "CNY",
		Status: payment.StatusSucceeded, Refunded: dec("0")}
	tests := []struct {
		name     string
		payment  *payment.Payment
		req      payment.RefundRequest
		status   string
		reason   string
		currency string
		// refunded is what the payment holds refunded afterwards; empty:
		// the payment is not changed.
		refunded string
		// callback is the callback's type and payment; empty: none.
		callback  rules.CallbackType
		paymentID string
	}{
		{"made", &paid, payment.RefundRequest{OrderID: "O-1", PaymentID: "P-1", Amount: dec("30.00"), Currency: "CNY"},
			payment.RefundSucceeded, "", "CNY", "30.00", rules.CallbackRefundSucceeded, "P-1"},
		{"in the payment's currency", &paid, payment.RefundRequest{OrderID: "O-1", Amount: dec("80.00")},
			payment.RefundSucceeded, "", "CNY", "80.00", rules.CallbackRefundSucceeded, "P-1"},
		{"above the payment", &paid, payment.RefundRequest{OrderID: "O-1", PaymentID: "P-1", Amount: dec("80.01"), Currency: "CNY"},
			payment.RefundRejected, payment.ReasonRefundExceedsPayment, "CNY", "", rules.CallbackRefundRejected, "P-1"},
		{"in another currency", &paid, payment.RefundRequest{OrderID: "O-1", PaymentID: "P-1", Amount: dec("1.00"), Currency: "USD"},
			payment.RefundRejected, payment.ReasonCurrencyMismatch, "USD", "", rules.CallbackRefundRejected, "P-1"},
		{"no payment", nil, payment.RefundRequest{OrderID: "O-1", PaymentID: "P-9", Amount: dec("1.00"), Currency: "CNY"},
			payment.RefundRejected, payment.ReasonNoPayment, "CNY", "", rules.CallbackRefundRejected, "P-9"},
		{"no payment and no currency", nil, payment.RefundRequest{OrderID: "O-1", Amount: dec("1.00")},
			payment.RefundRejected, payment.ReasonNoPayment, "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before payment.Payment
			if tt.payment != nil {
				before = *tt.payment
			}
			d := payment.DecideRefund(tt.payment, tt.req)
			if d.Status != tt.status || d.Reason != tt.reason || d.Currency != tt.currency {
				t.Fatalf("decided %s %q in %q, want %s %q in %q", d.Status, d.Reason, d.Currency, tt.status, tt.reason, tt.currency)
			}
			if tt.payment != nil && (!tt.payment.Refunded.Equal(before.Refunded) || tt.payment.Status != before.Status) {
				t.Fatalf("the payment given changed: %+v", *tt.payment)
			}
			switch {
			case tt.refunded == "" && d.Payment != nil:
				t.Fatalf("payment to store %+v, want none", *d.Payment)
			case tt.refunded != "" && (d.Payment == nil || !d.Payment.Refunded.Equal(dec(tt.refunded))):
				t.Fatalf("payment to store %+v, want refunded %s", d.Payment, tt.refunded)
			}
			switch {
			case tt.callback == "" && d.Callback != nil:
				t.Fatalf("callback %+v, want none", *d.Callback)
			case tt.callback != "" && (d.Callback == nil || d.Callback.Type != tt.callback || d.Callback.PaymentID != tt.paymentID):
				t.Fatalf("callback %+v, want %s of %s", d.Callback, tt.callback, tt.paymentID)
			}
		})
	}
}
