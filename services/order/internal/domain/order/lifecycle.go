package order

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// EventType names the event a state change emits; the values are the
// eventType names of the order-events contract.
type EventType string

// The events of the order lifecycle (docs/design.md, Order lifecycle).
const (
	EventCreated         EventType = "OrderCreated"
	EventCheckedOut      EventType = "OrderCheckedOut"
	EventPaid            EventType = "OrderPaid"
	EventRefundRequested EventType = "OrderRefundRequested"
	EventRefunded        EventType = "OrderRefunded"
	EventRefundRejected  EventType = "OrderRefundRejected"
	EventCancelled       EventType = "OrderCancelled"
	EventPaymentRejected EventType = "OrderPaymentRejected"
	EventPaymentReturned EventType = "OrderPaymentReturned"
)

// Event is what one state change emits. The order itself carries the rest
// of what the event's payload needs (customer, items, payment id, the
// running refund totals).
type Event struct {
	Type EventType
	// Version is the order's version after the change: the event's
	// aggregateVersion.
	Version int64
	// RefundID, Amount and Items describe the refund of refund events and
	// of returned payments.
	RefundID string
	Amount   decimal.Decimal
	Items    []Line
	// PaymentID and Currency are a returned payment's.
	PaymentID string
	Currency  string
	// Reason explains a cancellation, a rejected refund or a returned
	// payment.
	Reason string
}

// CreatedEvent is the event of a new order.
func (o *Order) CreatedEvent() Event {
	return Event{Type: EventCreated, Version: o.Version}
}

// change moves the order to status to: one state change, one version, one
// event.
func (o *Order) change(to Status, e Event) []Event {
	o.Status = to
	o.Version++
	e.Version = o.Version
	return []Event{e}
}

// Checkout makes a created order payable. Checking out an order that is
// already waiting for payment is a repeat and changes nothing.
func (o *Order) Checkout() ([]Event, error) {
	switch o.Status {
	case StatusCreated:
		return o.change(StatusPendingPayment, Event{Type: EventCheckedOut}), nil
	case StatusPendingPayment:
		return nil, nil
	}
	return nil, &TransitionError{From: o.Status, Action: ActionCheckout}
}

// Cancel cancels an order nobody has paid for. Cancelling a cancelled order
// is a repeat and changes nothing.
func (o *Order) Cancel(reason string) ([]Event, error) {
	if err := rules.ValidateReason("reason", reason); err != nil {
		return nil, err
	}
	switch o.Status {
	case StatusCreated, StatusPendingPayment:
		o.Reason = reason
		return o.change(StatusCancelled, Event{Type: EventCancelled, Reason: reason}), nil
	case StatusCancelled:
		return nil, nil
	}
	return nil, &TransitionError{From: o.Status, Action: ActionCancel}
}

// RefundRequest asks for money, and possibly goods, back on a paid order.
type RefundRequest struct {
	ID string
	// Items are the goods returned; each SKU must be on the order and not
	// yet returned. None: a refund of money alone.
	Items []Line
	// Amount is what the customer gets back. Zero: the price of Items.
	Amount decimal.Decimal
	// Reason says why an operator asks for it; empty for the customer's.
	Reason string
	// RequestedBy names the operator who asks; empty for the customer.
	RequestedBy string
}

// RequestRefund asks the payment service for a refund; a refund whose id
// the order already has is that refund asked again and changes nothing
// (ports names a keyed request's refund after its key, and an operator's
// retry names its refund id). The amount is not checked against what is
// left of the payment here: the payment service owns what was paid and
// rejects a refund above it, which brings the order back to where it was.
func (o *Order) RequestRefund(r RefundRequest) ([]Event, error) {
	if err := rules.ValidateID("refundId", r.ID); err != nil {
		return nil, err
	}
	if err := rules.ValidateReason("reason", r.Reason); err != nil {
		return nil, err
	}
	if err := rules.ValidateReason("requestedBy", r.RequestedBy); err != nil {
		return nil, err
	}
	if o.Refund(r.ID) != nil {
		// The same refund asked again (its id names the request that
		// made it): nothing changes, whatever the order's state now.
		return nil, nil
	}
	price, err := o.priceOfReturn(r.Items)
	if err != nil {
		return nil, err
	}
	amount := r.Amount
	if amount.IsZero() && len(r.Items) > 0 {
		// The goods' price, but never more than is left of the money:
		// goods whose money came back before (a refund of money alone)
		// come back for nothing.
		amount = decimal.Min(price, o.Amount.Sub(o.RefundedAmount()))
		if !amount.IsPositive() {
			return o.returnGoods(r)
		}
	}
	if err := rules.ValidatePositiveAmount("amount", amount); err != nil {
		return nil, err
	}
	if o.Status != StatusPaid && o.Status != StatusPartiallyRefunded {
		return nil, &TransitionError{From: o.Status, Action: ActionRequestRefund}
	}
	if err := o.checkReturnable(r.Items); err != nil {
		return nil, err
	}
	o.Refunds = append(o.Refunds, Refund{ID: r.ID, Kind: KindRefund, PaymentID: o.PaymentID, Amount: amount,
		Currency: o.Currency, Items: slices.Clone(r.Items), Status: RefundRequested, Reason: r.Reason, RequestedBy: r.RequestedBy})
	return o.change(StatusRefunding, Event{Type: EventRefundRequested, RefundID: r.ID, Amount: amount, Items: r.Items,
		Reason: r.Reason}), nil
}

// returnGoods records goods returned after all the order's money came back
// (a refund of money alone came first): nothing goes to the payment
// service, so the refund succeeds at once, with no money, and
// OrderRefunded tells inventory to restock them and the customer that
// they arrived. The order stays REFUNDED.
func (o *Order) returnGoods(r RefundRequest) ([]Event, error) {
	if o.Status != StatusRefunded {
		return nil, &TransitionError{From: o.Status, Action: ActionRequestRefund}
	}
	if err := o.checkReturnable(r.Items); err != nil {
		return nil, err
	}
	o.Refunds = append(o.Refunds, Refund{ID: r.ID, Kind: KindRefund, PaymentID: o.PaymentID, Amount: decimal.Zero,
		Currency: o.Currency, Items: slices.Clone(r.Items), Status: RefundSucceeded, Reason: r.Reason, RequestedBy: r.RequestedBy})
	return o.change(o.Status, Event{Type: EventRefunded, RefundID: r.ID, Amount: decimal.Zero, Items: r.Items, Reason: r.Reason}), nil
}

// priceOfReturn validates the lines of a return against the order and
// prices them at the order's unit prices.
func (o *Order) priceOfReturn(lines []Line) (decimal.Decimal, error) {
	if len(lines) > rules.MaxItems {
		return decimal.Decimal{}, rules.Invalid("items", "has %d entries; at most %d are allowed", len(lines), rules.MaxItems)
	}
	prices := make(map[string]decimal.Decimal, len(o.Items))
	for _, it := range o.Items {
		prices[it.SKU] = it.UnitPrice
	}
	seen := make(map[string]bool, len(lines))
	total := decimal.Zero
	for i, l := range lines {
		field := func(name string) string { return "items[" + strconv.Itoa(i) + "]." + name }
		if err := rules.ValidateID(field("sku"), l.SKU); err != nil {
			return decimal.Decimal{}, err
		}
		price, ok := prices[l.SKU]
		if !ok {
			return decimal.Decimal{}, rules.Invalid(field("sku"), "%q is not on order %s", l.SKU, o.ID)
		}
		if seen[l.SKU] {
			return decimal.Decimal{}, rules.Invalid(field("sku"), "%q is listed twice; list each SKU once", l.SKU)
		}
		seen[l.SKU] = true
		if err := rules.ValidateQuantity(field("quantity"), l.Quantity); err != nil {
			return decimal.Decimal{}, err
		}
		total = total.Add(price.Mul(decimal.NewFromInt(int64(l.Quantity))))
	}
	return total, nil
}

// checkReturnable refuses to return more of a SKU than the order holds
// after its earlier returns: a business rejection, since it depends on
// what was returned before.
func (o *Order) checkReturnable(lines []Line) error {
	returned := map[string]int{}
	for _, l := range o.ReturnedItems() {
		returned[l.SKU] = l.Quantity
	}
	for _, l := range lines {
		for _, it := range o.Items {
			if it.SKU == l.SKU && returned[l.SKU]+l.Quantity > it.Quantity {
				return &ReturnError{SKU: l.SKU, Ordered: it.Quantity, Returned: returned[l.SKU], Asked: l.Quantity}
			}
		}
	}
	return nil
}

// Callback is a payment service callback about this order.
type Callback struct {
	// ID is the eventId of the payment service's outbox row: the same for
	// every re-delivery, so it is the callback's idempotency key.
	ID        string
	Type      rules.CallbackType
	OrderID   string
	PaymentID string
	RefundID  string
	Amount    decimal.Decimal
	Currency  string
	Reason    string
}

// Validate checks the callback's fields, so a malformed callback is
// refused before it touches an order.
func (cb Callback) Validate() error {
	if err := rules.ValidateID("callbackId", cb.ID); err != nil {
		return err
	}
	switch cb.Type {
	case rules.CallbackPaymentSucceeded, rules.CallbackRefundSucceeded, rules.CallbackRefundRejected, rules.CallbackStockRejected:
	case "":
		return rules.Invalid("type", "is required")
	default:
		return rules.Invalid("type", "must be %s, %s, %s or %s, got %q", rules.CallbackPaymentSucceeded,
			rules.CallbackRefundSucceeded, rules.CallbackRefundRejected, rules.CallbackStockRejected, cb.Type)
	}
	if err := rules.ValidateID("orderId", cb.OrderID); err != nil {
		return err
	}
	if cb.Type == rules.CallbackPaymentSucceeded || cb.Type == rules.CallbackStockRejected || cb.PaymentID != "" {
		if err := rules.ValidateID("paymentId", cb.PaymentID); err != nil {
			return err
		}
	}
	if cb.Type == rules.CallbackRefundSucceeded || cb.Type == rules.CallbackRefundRejected {
		if err := rules.ValidateID("refundId", cb.RefundID); err != nil {
			return err
		}
	}
	if err := rules.ValidatePositiveAmount("amount", cb.Amount); err != nil {
		return err
	}
	if err := rules.ValidateCurrency("currency", cb.Currency); err != nil {
		return err
	}
	return rules.ValidateReason("reason", cb.Reason)
}

// ApplyCallback applies a payment service callback. A callback for a
// transition the order has already made is a repeat: no events, no error.
// A callback that does not fit the order is a business rejection
// (*TransitionError or *MismatchError), so the sender stops retrying.
func (o *Order) ApplyCallback(cb Callback) ([]Event, error) {
	if err := cb.Validate(); err != nil {
		return nil, err
	}
	if cb.OrderID != o.ID {
		return nil, &MismatchError{Field: "orderId", Want: o.ID, Got: cb.OrderID}
	}
	switch cb.Type {
	case rules.CallbackPaymentSucceeded:
		return o.pay(cb)
	case rules.CallbackRefundSucceeded:
		return o.completeRefund(cb)
	case rules.CallbackStockRejected:
		return o.compensateShortage(cb)
	default:
		return o.rejectRefund(cb)
	}
}

// compensateShortage applies the inventory service's report that the
// stock could not cover the paid order (docs/decisions.md, A shortage is
// compensated): the order asks the payment service for all of the money
// still held, under a refund id that is a function of the order, and
// is CANCELLED with rules.ReasonOutOfStock once the refund succeeds. No
// goods come back with it, since none were deducted. A report of an order
// already compensating is a repeat; one that arrives while another refund
// is in flight is answered ErrRefundInFlight, so it comes again once that
// refund is settled; an order refunded in full already has nothing left
// to give back.
func (o *Order) compensateShortage(cb Callback) ([]Event, error) {
	if o.Reason == rules.ReasonOutOfStock {
		return nil, nil
	}
	switch o.Status {
	case StatusPaid, StatusPartiallyRefunded:
	case StatusRefunding:
		return nil, ErrRefundInFlight
	case StatusRefunded:
		return nil, nil
	default:
		return nil, &TransitionError{From: o.Status, Action: ActionCompensate}
	}
	if cb.PaymentID != o.PaymentID {
		return nil, &MismatchError{Field: "paymentId", Want: o.PaymentID, Got: cb.PaymentID}
	}
	rest := o.Amount.Sub(o.RefundedAmount())
	o.Reason = rules.ReasonOutOfStock
	o.Refunds = append(o.Refunds, Refund{ID: rules.ShortageRefundID(o.ID), Kind: KindRefund, PaymentID: o.PaymentID,
		Amount: rest, Currency: o.Currency, Items: []Line{}, Status: RefundRequested, Reason: rules.ReasonOutOfStock})
	return o.change(StatusRefunding, Event{Type: EventRefundRequested, RefundID: rules.ShortageRefundID(o.ID),
		Amount: rest, Items: []Line{}, Reason: rules.ReasonOutOfStock}), nil
}

// Reasons a payment is returned (OrderPaymentRejected).
const (
	ReasonOrderCancelled  = "ORDER_CANCELLED"
	ReasonOrderNotPayable = "ORDER_NOT_PAYABLE"
	ReasonPaidByAnother   = "PAID_BY_ANOTHER_PAYMENT"
	ReasonAmountMismatch  = "AMOUNT_MISMATCH"
)

// pay applies a payment. A payment the order cannot take (it was
// cancelled before the payment arrived, say) is not refused: the money has
// moved, so the order records OrderPaymentRejected, which makes the payment
// service return it, and stays where it is.
func (o *Order) pay(cb Callback) ([]Event, error) {
	if o.returnOf(cb.PaymentID) != nil {
		return nil, nil // already being returned
	}
	var reason string
	switch {
	case o.Status == StatusPendingPayment && cb.Currency == o.Currency && cb.Amount.Equal(o.Amount):
		o.PaymentID = cb.PaymentID
		return o.change(StatusPaid, Event{Type: EventPaid}), nil
	case o.PaymentID == cb.PaymentID:
		return nil, nil // paid by this very payment: a repeat
	case o.Status == StatusCancelled:
		reason = ReasonOrderCancelled
	case o.Status == StatusCreated:
		reason = ReasonOrderNotPayable
	case o.Status == StatusPendingPayment:
		reason = fmt.Sprintf("%s: order has %s %s, payment %s %s", ReasonAmountMismatch,
			money(o.Amount), o.Currency, money(cb.Amount), cb.Currency)
	default:
		reason = ReasonPaidByAnother
	}
	o.Refunds = append(o.Refunds, Refund{ID: rules.ReturnRefundID(cb.PaymentID), Kind: KindPaymentReturn, PaymentID: cb.PaymentID,
		Amount: cb.Amount, Currency: cb.Currency, Items: []Line{}, Status: RefundRequested, Reason: reason})
	r := o.Refunds[len(o.Refunds)-1]
	return o.change(o.Status, Event{Type: EventPaymentRejected, RefundID: r.ID, PaymentID: r.PaymentID,
		Amount: r.Amount, Currency: r.Currency, Reason: reason}), nil
}

// completeRefund applies a successful refund: of the order's money (the
// order is REFUNDED once the whole amount is back, PARTIALLY_REFUNDED
// before), or of a returned payment (the order stays where it is).
func (o *Order) completeRefund(cb Callback) ([]Event, error) {
	r := o.Refund(cb.RefundID)
	switch {
	case r != nil && r.Status == RefundSucceeded:
		return nil, nil
	case r != nil && r.Status == RefundRequested && r.Kind == KindPaymentReturn:
		r.Status = RefundSucceeded
		return o.change(o.Status, Event{Type: EventPaymentReturned, RefundID: r.ID, PaymentID: r.PaymentID,
			Amount: r.Amount, Currency: r.Currency}), nil
	case o.Status != StatusRefunding:
		return nil, &TransitionError{From: o.Status, Action: ActionCompleteRefund}
	case r == nil || r.Status != RefundRequested:
		want := ""
		if p := o.PendingRefund(); p != nil {
			want = p.ID
		}
		return nil, &MismatchError{Field: "refundId", Want: want, Got: cb.RefundID}
	case cb.Currency != o.Currency:
		return nil, &MismatchError{Field: "currency", Want: o.Currency, Got: cb.Currency}
	}
	// The payment service is the authority on money moved, so the refunded
	// amount is the one it reports.
	r.Status, r.Amount = RefundSucceeded, cb.Amount
	to := StatusPartiallyRefunded
	switch {
	case r.ID == rules.ShortageRefundID(o.ID):
		// The compensation of a shortage gave back all that was left.
		to = StatusCancelled
	case o.RefundedAmount().GreaterThanOrEqual(o.Amount):
		to = StatusRefunded
	}
	return o.change(to, Event{Type: EventRefunded, RefundID: r.ID, Amount: r.Amount, Items: r.Items, Reason: r.Reason}), nil
}

// rejectRefund applies a refund the payment service refused: the order goes
// back to where it was before the request.
func (o *Order) rejectRefund(cb Callback) ([]Event, error) {
	r := o.Refund(cb.RefundID)
	switch {
	case r != nil && r.Status == RefundRejected:
		return nil, nil
	case r != nil && r.Kind == KindPaymentReturn:
		// A returned payment the payment service cannot return needs a
		// person: reconciliation reports it.
		return nil, &TransitionError{From: o.Status, Action: ActionRejectRefund}
	case o.Status != StatusRefunding:
		return nil, &TransitionError{From: o.Status, Action: ActionRejectRefund}
	case r == nil || r.Status != RefundRequested:
		want := ""
		if p := o.PendingRefund(); p != nil {
			want = p.ID
		}
		return nil, &MismatchError{Field: "refundId", Want: want, Got: cb.RefundID}
	}
	r.Status, r.Reason = RefundRejected, cb.Reason
	back := StatusPaid
	if o.RefundedAmount().IsPositive() {
		back = StatusPartiallyRefunded
	}
	return o.change(back, Event{Type: EventRefundRejected, RefundID: r.ID, Amount: r.Amount, Reason: cb.Reason}), nil
}

func money(d decimal.Decimal) string { return d.StringFixed(rules.MoneyPlaces) }

// MaxFenceVersion is the highest version a fence may raise an order to:
// the largest integer a JSON number carries exactly, so every client reads
// the version the fence wrote.
const MaxFenceVersion int64 = 1<<53 - 1

// FenceVersion raises the order's version to atLeast, if it is below,
// without a state change and without an event: the version fence of
// docs/decisions.md (A restore is fenced). An order restored from an
// earlier backup holds a version its consumers have passed; its next
// change would reuse a version they already applied and be ignored as
// stale. Raised to the highest version any consumer applied, the next
// change gets the version after it. It reports whether the version moved;
// a fence at or below the current version changes nothing, so a repeat is
// harmless.
func (o *Order) FenceVersion(atLeast int64) (bool, error) {
	if atLeast < 1 || atLeast > MaxFenceVersion {
		return false, rules.Invalid("atLeast", "must be between 1 and %d, got %d", MaxFenceVersion, atLeast)
	}
	if atLeast <= o.Version {
		return false, nil
	}
	o.Version = atLeast
	return true, nil
}
