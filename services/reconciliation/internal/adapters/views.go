package adapters

import (
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// The JSON of the services' read-only reconciliation views
// (POST /admin/reconciliation/orders on each service, README.md (API)).

type lineJSON struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

func linesOf(ls []lineJSON) []rec.Line {
	out := make([]rec.Line, len(ls))
	for i, l := range ls {
		out[i] = rec.Line{SKU: l.SKU, Quantity: l.Quantity}
	}
	return out
}

type outboxJSON struct {
	EventID          string    `json:"eventId"`
	EventType        string    `json:"eventType"`
	AggregateVersion int64     `json:"aggregateVersion"`
	Status           string    `json:"status"`
	Attempts         int       `json:"attempts"`
	CreatedAt        time.Time `json:"createdAt"`
	NextAttemptAt    time.Time `json:"nextAttemptAt"`
}

func outboxOf(rows []outboxJSON) []rec.OutboxRow {
	out := make([]rec.OutboxRow, len(rows))
	for i, r := range rows {
		out[i] = rec.OutboxRow{EventID: r.EventID, EventType: r.EventType, AggregateVersion: r.AggregateVersion,
			Status: r.Status, Attempts: r.Attempts, CreatedAt: r.CreatedAt, NextAttemptAt: r.NextAttemptAt}
	}
	return out
}

type orderJSON struct {
	OrderID    string      `json:"orderId"`
	Found      bool        `json:"found"`
	Status     string      `json:"status"`
	Version    int64       `json:"version"`
	Amount     event.Money `json:"amount"`
	Currency   string      `json:"currency"`
	CustomerID string      `json:"customerId"`
	Items      []struct {
		SKU       string      `json:"sku"`
		Quantity  int         `json:"quantity"`
		UnitPrice event.Money `json:"unitPrice"`
	} `json:"items"`
	PaymentID      string      `json:"paymentId"`
	RefundedAmount event.Money `json:"refundedAmount"`
	ReturnedItems  []lineJSON  `json:"returnedItems"`
	Refunds        []struct {
		RefundID  string      `json:"refundId"`
		Kind      string      `json:"kind"`
		PaymentID string      `json:"paymentId"`
		Amount    event.Money `json:"amount"`
		Currency  string      `json:"currency"`
		Items     []lineJSON  `json:"items"`
		Status    string      `json:"status"`
		Reason    string      `json:"reason"`
	} `json:"refunds"`
	UpdatedAt time.Time    `json:"updatedAt"`
	Events    []outboxJSON `json:"events"`
}

func (v orderJSON) order() rec.Order {
	o := rec.Order{ID: v.OrderID, Found: v.Found, Status: v.Status, Version: v.Version, Amount: v.Amount.Decimal,
		Currency: v.Currency, CustomerID: v.CustomerID, PaymentID: v.PaymentID, RefundedAmount: v.RefundedAmount.Decimal,
		ReturnedItems: linesOf(v.ReturnedItems), UpdatedAt: v.UpdatedAt, Events: outboxOf(v.Events)}
	for _, it := range v.Items {
		o.Items = append(o.Items, rec.OrderLine{Line: rec.Line{SKU: it.SKU, Quantity: it.Quantity}, UnitPrice: it.UnitPrice.Decimal})
	}
	for _, r := range v.Refunds {
		o.Refunds = append(o.Refunds, rec.Refund{ID: r.RefundID, Kind: r.Kind, PaymentID: r.PaymentID, Amount: r.Amount.Decimal,
			Currency: r.Currency, Items: linesOf(r.Items), Status: r.Status, Reason: r.Reason})
	}
	return o
}

// consumerJSON is the part every consumer's view shares: its version guard
// for the order and the order's outstanding dead letters.
type consumerJSON struct {
	Consumer struct {
		Version int64  `json:"version"`
		State   string `json:"state"`
	} `json:"consumer"`
	DeadLetters []struct {
		ID             int64     `json:"id"`
		EventID        string    `json:"eventId"`
		EventType      string    `json:"eventType"`
		ErrorClass     string    `json:"errorClass"`
		FailureReason  string    `json:"failureReason"`
		DeadLetteredAt time.Time `json:"deadLetteredAt"`
		ReplayedBefore bool      `json:"replayedBefore"`
	} `json:"deadLetters"`
}

func (c consumerJSON) facts() (rec.ConsumerState, []rec.DeadLetter) {
	dead := make([]rec.DeadLetter, len(c.DeadLetters))
	for i, d := range c.DeadLetters {
		dead[i] = rec.DeadLetter{ID: d.ID, EventID: d.EventID, EventType: d.EventType, ErrorClass: d.ErrorClass,
			FailureReason: d.FailureReason, DeadLetteredAt: d.DeadLetteredAt, ReplayedBefore: d.ReplayedBefore}
	}
	return rec.ConsumerState{Version: c.Consumer.Version, State: c.Consumer.State}, dead
}

type paymentJSON struct {
	OrderID string `json:"orderId"`
	Payment *struct {
		PaymentID string      `json:"paymentId"`
		Amount    event.Money `json:"amount"`
		Currency  string      `json:"currency"`
		Status    string      `json:"status"`
		Refunded  event.Money `json:"refunded"`
		UpdatedAt time.Time   `json:"updatedAt"`
	} `json:"payment"`
	Refunds []struct {
		RefundID  string      `json:"refundId"`
		Amount    event.Money `json:"amount"`
		Status    string      `json:"status"`
		Reason    string      `json:"reason"`
		CreatedAt time.Time   `json:"createdAt"`
	} `json:"refunds"`
	Outbox []outboxJSON `json:"outbox"`
	consumerJSON
}

func (v paymentJSON) payment() rec.Payment {
	var p rec.Payment
	if v.Payment != nil {
		p = rec.Payment{Found: true, PaymentID: v.Payment.PaymentID, Amount: v.Payment.Amount.Decimal, Currency: v.Payment.Currency,
			Status: v.Payment.Status, Refunded: v.Payment.Refunded.Decimal, UpdatedAt: v.Payment.UpdatedAt}
	}
	for _, r := range v.Refunds {
		p.Refunds = append(p.Refunds, rec.PaymentRefund{ID: r.RefundID, Amount: r.Amount.Decimal, Status: r.Status,
			Reason: r.Reason, CreatedAt: r.CreatedAt})
	}
	p.Outbox = outboxOf(v.Outbox)
	p.Consumer, p.Dead = v.facts()
	return p
}

type inventoryJSON struct {
	OrderID   string     `json:"orderId"`
	Status    string     `json:"status"`
	Reason    string     `json:"reason"`
	Items     []lineJSON `json:"items"`
	Restocked []lineJSON `json:"restocked"`
	UpdatedAt time.Time  `json:"updatedAt"`
	consumerJSON
}

func (v inventoryJSON) inventory() rec.Inventory {
	inv := rec.Inventory{Status: v.Status, Reason: v.Reason, Items: linesOf(v.Items), Restocked: linesOf(v.Restocked), UpdatedAt: v.UpdatedAt}
	inv.Consumer, inv.Dead = v.facts()
	return inv
}

type pointsJSON struct {
	OrderID string `json:"orderId"`
	Entries []struct {
		EventID   string      `json:"eventId"`
		Type      string      `json:"type"`
		Points    int64       `json:"points"`
		Amount    event.Money `json:"amount"`
		CreatedAt time.Time   `json:"createdAt"`
	} `json:"entries"`
	consumerJSON
}

func (v pointsJSON) points() rec.Points {
	var p rec.Points
	for _, e := range v.Entries {
		p.Entries = append(p.Entries, rec.PointsEntry{EventID: e.EventID, Type: e.Type, Points: e.Points, Amount: e.Amount.Decimal, CreatedAt: e.CreatedAt})
	}
	p.Consumer, p.Dead = v.facts()
	return p
}

type notificationsJSON struct {
	OrderID       string `json:"orderId"`
	Notifications []struct {
		EventID   string    `json:"eventId"`
		Kind      string    `json:"kind"`
		CreatedAt time.Time `json:"createdAt"`
	} `json:"notifications"`
	consumerJSON
}

func (v notificationsJSON) notifications() rec.Notifications {
	var n rec.Notifications
	for _, s := range v.Notifications {
		n.Sent = append(n.Sent, rec.Notice{EventID: s.EventID, Kind: s.Kind, CreatedAt: s.CreatedAt})
	}
	n.Consumer, n.Dead = v.facts()
	return n
}
