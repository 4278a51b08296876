package rules

import (
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// PointsFor is the loyalty rule the points service applies and
// reconciliation checks: an order is worth one point per whole currency
// unit the customer paid and has not had back, rounded down, never below
// zero. An order of 80.00 earns 80 points; after a refund of 0.01 it is
// worth 79.
func PointsFor(paid, refunded decimal.Decimal) int64 {
	net := paid.Sub(refunded)
	if !net.IsPositive() {
		return 0
	}
	return net.Floor().IntPart()
}

// ReturnRefundID is the refund id under which a payment the order could
// not take is returned: a function of the payment, so the order service
// (OrderPaymentRejected) and reconciliation (a compensation) name the same
// refund, and the payment service, which makes a refund once per id, gives
// the money back once whoever asks first.
func ReturnRefundID(paymentID string) string {
	namespace := uuid.MustParse("8d1f6f64-6a0e-4f0e-9c53-4d6f1b2e7a10")
	return "R-" + uuid.NewSHA1(namespace, []byte(paymentID)).String()
}

// ReasonOutOfStock is why an order whose goods the stock could not cover
// was refunded in full and cancelled: the reason of its last
// OrderRefundRequested and OrderRefunded, and of the order itself.
const ReasonOutOfStock = "OUT_OF_STOCK"

// ShortageRefundID is the refund id under which a paid order the stock
// could not cover gets its money back: a function of the order, so however
// often the shortage is reported the order asks for one refund, and the
// payment service, which makes a refund once per id, makes it once.
func ShortageRefundID(orderID string) string {
	namespace := uuid.MustParse("3b0c2a57-9f4e-4c1d-8e7a-5a2f6d9b1c34")
	return "R-" + uuid.NewSHA1(namespace, []byte(orderID)).String()
}

// CallbackType names what a callback reports: the payment service tells
// the order service of a payment or a refund, and the inventory service of
// a paid order the stock could not cover. The order's domain decides on
// each kind, the payment's domain decides which one a refund reports; the
// callback's wire form is pkg/event's Callback.
type CallbackType string

// The callback types.
const (
	CallbackPaymentSucceeded CallbackType = "PAYMENT_SUCCEEDED"
	CallbackRefundSucceeded  CallbackType = "REFUND_SUCCEEDED"
	CallbackRefundRejected   CallbackType = "REFUND_REJECTED"
	// CallbackStockRejected: the inventory service could not deduct a
	// paid order's goods; the order gives the customer's money back
	// (docs/decisions.md, A shortage is compensated).
	CallbackStockRejected CallbackType = "STOCK_REJECTED"
)
