package event

// Item is one order line as consumers need it.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// PricedItem is an order line with its unit price.
type PricedItem struct {
	SKU       string `json:"sku"`
	Quantity  int    `json:"quantity"`
	UnitPrice Money  `json:"unitPrice"`
}

// OrderCreatedData is the payload of OrderCreated v1.
type OrderCreatedData struct {
	CustomerID string       `json:"customerId"`
	Currency   string       `json:"currency"`
	Amount     Money        `json:"amount"`
	Items      []PricedItem `json:"items"`
}

// OrderCheckedOutData is the payload of OrderCheckedOut v1.
type OrderCheckedOutData struct {
	CustomerID string `json:"customerId"`
	Currency   string `json:"currency"`
	Amount     Money  `json:"amount"`
}

// OrderPaidData is the payload of OrderPaid v1.
type OrderPaidData struct {
	PaymentID  string `json:"paymentId"`
	PaidAmount Money  `json:"paidAmount"`
	Currency   string `json:"currency"`
	CustomerID string `json:"customerId"`
	Items      []Item `json:"items"`
}

// OrderRefundRequestedData is the payload of OrderRefundRequested v1.
type OrderRefundRequestedData struct {
	RefundID  string `json:"refundId"`
	PaymentID string `json:"paymentId"`
	Amount    Money  `json:"amount"`
	Currency  string `json:"currency"`
	// Reason is why the order asks for the refund when the customer did
	// not (ReasonOutOfStock); empty for a customer's refund.
	Reason string `json:"reason,omitempty"`
}

// OrderRefundedData is the payload of OrderRefunded v2 and v3: one refund of
// several an order may have. It carries what this refund gave back (money,
// and the goods returned with it, none for a refund of money alone) and the
// order's running totals after it, so a consumer that applies the totals
// reaches the right state even if it never applies an earlier refund.
type OrderRefundedData struct {
	RefundID            string `json:"refundId"`
	PaymentID           string `json:"paymentId"`
	RefundedAmount      Money  `json:"refundedAmount"`
	TotalRefundedAmount Money  `json:"totalRefundedAmount"`
	Currency            string `json:"currency"`
	CustomerID          string `json:"customerId"`
	Items               []Item `json:"items"`
	TotalReturnedItems  []Item `json:"totalReturnedItems"`
	// Reason is the refund's when the order asked for it itself
	// (ReasonOutOfStock: the order is cancelled, the customer is told
	// why); empty for a customer's refund.
	Reason string `json:"reason,omitempty"`
}

// OrderRefundedV1Data is the payload of OrderRefunded v1, from the release
// in which an order had one refund and it returned every item.
type OrderRefundedV1Data struct {
	RefundID       string `json:"refundId"`
	PaymentID      string `json:"paymentId"`
	RefundedAmount Money  `json:"refundedAmount"`
	Currency       string `json:"currency"`
	CustomerID     string `json:"customerId"`
	Items          []Item `json:"items"`
}

// RefundedData decodes the payload of an OrderRefunded of any version as
// v2. A v1 refund was the order's only one and returned every item, so its
// totals are its own amount and items.
func (e Envelope) RefundedData() (OrderRefundedData, error) {
	if e.EventVersion >= 2 {
		var d OrderRefundedData
		err := e.DecodeData(&d)
		return d, err
	}
	var v1 OrderRefundedV1Data
	if err := e.DecodeData(&v1); err != nil {
		return OrderRefundedData{}, err
	}
	return OrderRefundedData{
		RefundID: v1.RefundID, PaymentID: v1.PaymentID, RefundedAmount: v1.RefundedAmount,
		TotalRefundedAmount: v1.RefundedAmount, Currency: v1.Currency, CustomerID: v1.CustomerID,
		Items: v1.Items, TotalReturnedItems: v1.Items,
	}, nil
}

// OrderRefundRejectedData is the payload of OrderRefundRejected v1.
type OrderRefundRejectedData struct {
	RefundID   string `json:"refundId"`
	Amount     Money  `json:"amount"`
	Currency   string `json:"currency"`
	CustomerID string `json:"customerId"`
	Reason     string `json:"reason"`
}

// OrderCancelledData is the payload of OrderCancelled v1.
type OrderCancelledData struct {
	CustomerID string `json:"customerId"`
	Reason     string `json:"reason"`
}

// OrderPaymentRejectedData is the payload of OrderPaymentRejected v1: a
// payment the order could not take, and the refund that returns it.
type OrderPaymentRejectedData struct {
	PaymentID  string `json:"paymentId"`
	RefundID   string `json:"refundId"`
	Amount     Money  `json:"amount"`
	Currency   string `json:"currency"`
	CustomerID string `json:"customerId"`
	// Reason says why the order could not take it (ORDER_CANCELLED, ...).
	Reason string `json:"reason"`
}

// OrderPaymentReturnedData is the payload of OrderPaymentReturned v1: the
// payment service has returned a rejected payment.
type OrderPaymentReturnedData struct {
	PaymentID  string `json:"paymentId"`
	RefundID   string `json:"refundId"`
	Amount     Money  `json:"amount"`
	Currency   string `json:"currency"`
	CustomerID string `json:"customerId"`
}
