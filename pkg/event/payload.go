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
}

// OrderRefundedData is the payload of OrderRefunded v1. A refund returns the
// goods, so it carries the items to restock.
type OrderRefundedData struct {
	RefundID       string `json:"refundId"`
	PaymentID      string `json:"paymentId"`
	RefundedAmount Money  `json:"refundedAmount"`
	Currency       string `json:"currency"`
	CustomerID     string `json:"customerId"`
	Items          []Item `json:"items"`
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
