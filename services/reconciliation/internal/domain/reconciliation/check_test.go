package reconciliation_test

import (
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

var (
	t0          = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	stuckBefore = t0.Add(time.Minute)
)

func sent(id, typ string, v int64) rec.OutboxRow {
	return rec.OutboxRow{EventID: id, EventType: typ, AggregateVersion: v, Status: "SENT", Attempts: 1, CreatedAt: t0}
}

// paid returns the facts of an order of two SKU-1 at 10.00, paid, on which
// every service agrees.
func paid() rec.Facts {
	return rec.Facts{
		Order: rec.Order{ID: "O-1", Found: true, Status: rec.StatusPaid, Version: 3, Amount: dec("20"), Currency: "CNY",
			CustomerID: "C-1", Items: []rec.OrderLine{{Line: rec.Line{SKU: "SKU-1", Quantity: 2}, UnitPrice: dec("10")}},
			PaymentID: "P-1", RefundedAmount: decimal.Zero, UpdatedAt: t0,
			Events: []rec.OutboxRow{sent("E-1", "OrderCreated", 1), sent("E-2", "OrderCheckedOut", 2), sent("E-3", "OrderPaid", 3)}},
		Payment: rec.Payment{Found: true, PaymentID: "P-1", Amount: dec("20"), Currency: "CNY", Status: rec.PaymentSucceeded,
			Refunded: decimal.Zero, Outbox: []rec.OutboxRow{sent("C-1", "PAYMENT_SUCCEEDED", 2)}},
		Inventory:     rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "SKU-1", Quantity: 2}}},
		Points:        rec.Points{Entries: []rec.PointsEntry{{EventID: "E-3", Type: "EARN", Points: 20, Amount: dec("20")}}},
		Notifications: rec.Notifications{Sent: []rec.Notice{{EventID: "E-3", Kind: "ORDER_PAID"}}},
	}
}

// refunded applies a succeeded refund of amount returning items to the facts
// of every service, as they look once converged.
func refunded(f rec.Facts, id, amount string, points int64, items ...rec.Line) rec.Facts {
	o := &f.Order
	o.Version += 2
	o.Refunds = append(o.Refunds, rec.Refund{ID: id, Kind: rec.KindRefund, PaymentID: "P-1", Amount: dec(amount), Currency: "CNY",
		Items: items, Status: rec.RefundSucceeded})
	o.RefundedAmount = o.RefundedAmount.Add(dec(amount))
	o.ReturnedItems = append(o.ReturnedItems, items...)
	o.Status = rec.StatusPartiallyRefunded
	if o.RefundedAmount.Equal(o.Amount) {
		o.Status = rec.StatusRefunded
	}
	o.Events = append(o.Events, sent("E-"+id+"-req", "OrderRefundRequested", o.Version-1), sent("E-"+id, "OrderRefunded", o.Version))
	f.Payment.Refunded = o.RefundedAmount
	f.Payment.Status = rec.PaymentPartiallyRefunded
	if o.Status == rec.StatusRefunded {
		f.Payment.Status = rec.PaymentRefunded
	}
	f.Payment.Refunds = append(f.Payment.Refunds, rec.PaymentRefund{ID: id, Amount: dec(amount), Status: "SUCCEEDED"})
	f.Inventory.Restocked = append(f.Inventory.Restocked, items...)
	if len(f.Inventory.Restocked) > 0 {
		f.Inventory.Status = rec.InventoryPartiallyRestocked
	}
	f.Points.Entries = append(f.Points.Entries, rec.PointsEntry{EventID: "E-" + id, Type: "REVERSAL", Points: points, Amount: dec(amount)})
	f.Notifications.Sent = append(f.Notifications.Sent, rec.Notice{EventID: "E-" + id, Kind: "ORDER_REFUNDED"})
	return f
}

// outOfStock returns the facts of a paid order the stock could not cover,
// compensated: inventory REJECTED it, the order asked for all its money
// back and was cancelled once the refund succeeded, and the points earned
// were reversed.
func outOfStock() rec.Facts {
	f := refunded(paid(), "R-S", "20.00", -20)
	f.Order.Status = rec.StatusCancelled
	f.Inventory = rec.Inventory{Status: rec.InventoryRejected, Reason: "INSUFFICIENT_STOCK", Items: f.Inventory.Items}
	return f
}

// cancelled returns the facts of an order cancelled while its payment was
// on the way: the payment service took 20.00 and nothing went back.
func cancelled() rec.Facts {
	return rec.Facts{
		Order: rec.Order{ID: "O-1", Found: true, Status: rec.StatusCancelled, Version: 3, Amount: dec("20"), Currency: "CNY",
			Items:  []rec.OrderLine{{Line: rec.Line{SKU: "SKU-1", Quantity: 2}, UnitPrice: dec("10")}},
			Events: []rec.OutboxRow{sent("E-1", "OrderCreated", 1), sent("E-2", "OrderCheckedOut", 2), sent("E-3", "OrderCancelled", 3)}},
		Payment:   rec.Payment{Found: true, PaymentID: "P-1", Amount: dec("20"), Currency: "CNY", Status: rec.PaymentSucceeded, Refunded: decimal.Zero},
		Inventory: rec.Inventory{Status: rec.InventoryNone},
	}
}

type want struct {
	kind    rec.Kind
	service string
	action  rec.ActionType
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name  string
		facts func() rec.Facts
		want  []want
	}{
		{"a paid order everyone agrees on", paid, nil},
		{"partial refunds everyone agrees on", func() rec.Facts {
			f := refunded(paid(), "R-1", "0.01", -1)
			return refunded(f, "R-2", "10.00", -10, rec.Line{SKU: "SKU-1", Quantity: 1})
		}, nil},
		{"a full refund everyone agrees on", func() rec.Facts {
			f := refunded(paid(), "R-1", "20.00", -20, rec.Line{SKU: "SKU-1", Quantity: 2})
			f.Inventory.Status = rec.InventoryRestocked
			return f
		}, nil},
		{"a cancelled order without a payment", func() rec.Facts {
			f := cancelled()
			f.Payment = rec.Payment{}
			return f
		}, nil},
		// The first case: cancelled, paid, nothing went back.
		{"a cancelled order keeps the customer's money", cancelled,
			[]want{{rec.PaymentForUnpayableOrder, rec.ServicePayment, rec.ActionRefund}}},
		{"a cancelled order whose payment went back", func() rec.Facts {
			f := cancelled()
			f.Payment.Refunded, f.Payment.Status = dec("20"), rec.PaymentRefunded
			return f
		}, nil},
		{"a return stuck in the payment service's dead letters", func() rec.Facts {
			f := cancelled()
			f.Payment.Dead = []rec.DeadLetter{{ID: 4, EventID: "E-4", EventType: "OrderPaymentRejected", ErrorClass: "RETRYABLE"}}
			return f
		}, []want{{rec.StuckInDLQ, rec.ServicePayment, rec.ActionReplay}}},
		// A consumer restored from an old backup: its effect, its dedup row
		// and its version are gone.
		{"inventory lost its effect", func() rec.Facts {
			f := paid()
			f.Inventory = rec.Inventory{Status: rec.InventoryNone}
			return f
		}, []want{{rec.MissingEffect, rec.ServiceInventory, rec.ActionRepublish}}},
		// The second case, as it was: paid, inventory NONE, one
		// dead letter.
		{"an event stuck in a dead letter", func() rec.Facts {
			f := paid()
			f.Inventory = rec.Inventory{Status: rec.InventoryNone,
				Dead: []rec.DeadLetter{{ID: 9, EventID: "E-3", EventType: "OrderPaid", ErrorClass: "PERMANENT"}}}
			return f
		}, []want{{rec.StuckInDLQ, rec.ServiceInventory, rec.ActionReplay}}},
		{"a dead letter that came back after a replay", func() rec.Facts {
			f := paid()
			f.Inventory = rec.Inventory{Status: rec.InventoryNone,
				Dead: []rec.DeadLetter{{ID: 10, EventID: "E-3", EventType: "OrderPaid", ErrorClass: "PERMANENT", ReplayedBefore: true}}}
			return f
		}, []want{{rec.StuckInDLQ, rec.ServiceInventory, rec.ActionManualReview}}},
		{"the order's events stuck in its outbox", func() rec.Facts {
			f := paid()
			f.Order.Events[2].Status = "PENDING"
			f.Inventory, f.Points, f.Notifications = rec.Inventory{Status: rec.InventoryNone}, rec.Points{}, rec.Notifications{}
			return f
		}, []want{{rec.StuckInOutbox, rec.ServiceOrder, rec.ActionRepublish}}},
		{"a message pending but not yet past the deadline", func() rec.Facts {
			f := paid()
			f.Order.Events[2].Status, f.Order.Events[2].CreatedAt = "PENDING", stuckBefore.Add(time.Second)
			return f
		}, nil},
		// The third case, as it was: 0.01 of 20.00 refunded, both
		// units back in stock, 0 points reversed.
		{"a partial refund that restocked everything", func() rec.Facts {
			f := refunded(paid(), "R-1", "0.01", 0)
			f.Inventory.Restocked, f.Inventory.Status = []rec.Line{{SKU: "SKU-1", Quantity: 2}}, rec.InventoryRestocked
			return f
		}, []want{{rec.ExtraEffect, rec.ServiceInventory, rec.ActionManualReview}, {rec.AmountMismatch, rec.ServicePoints, rec.ActionManualReview}}},
		{"a refund the points service never applied", func() rec.Facts {
			f := refunded(paid(), "R-1", "5.00", -5)
			f.Points.Entries = f.Points.Entries[:1]
			return f
		}, []want{{rec.MissingEffect, rec.ServicePoints, rec.ActionRepublish}}},
		{"points earned twice", func() rec.Facts {
			f := paid()
			f.Points.Entries = append(f.Points.Entries, rec.PointsEntry{EventID: "E-x", Type: "EARN", Points: 20, Amount: dec("20")})
			return f
		}, []want{{rec.ExtraEffect, rec.ServicePoints, rec.ActionManualReview}}},
		{"a notification missing", func() rec.Facts {
			f := refunded(paid(), "R-1", "5.00", -5)
			f.Notifications.Sent = f.Notifications.Sent[:1]
			return f
		}, []want{{rec.MissingEffect, rec.ServiceNotification, rec.ActionRepublish}}},
		{"the payment refunded more than the order knows", func() rec.Facts {
			f := paid()
			f.Payment.Refunded, f.Payment.Status = dec("5"), rec.PaymentPartiallyRefunded
			return f
		}, []want{{rec.AmountMismatch, rec.ServicePayment, rec.ActionManualReview}}},
		{"a refund the order has not heard of", func() rec.Facts {
			f := paid()
			f.Order.Status = rec.StatusRefunding
			f.Order.Refunds = []rec.Refund{{ID: "R-1", Kind: rec.KindRefund, PaymentID: "P-1", Amount: dec("5"), Status: rec.RefundRequested}}
			f.Payment.Refunded, f.Payment.Status = dec("5"), rec.PaymentPartiallyRefunded
			f.Payment.Refunds = []rec.PaymentRefund{{ID: "R-1", Amount: dec("5"), Status: "SUCCEEDED"}}
			return f
		}, []want{{rec.MissingEffect, rec.ServiceOrder, rec.ActionRepublish}}},
		{"a refund request that never reached the payment service", func() rec.Facts {
			f := paid()
			f.Order.Status = rec.StatusRefunding
			f.Order.Refunds = []rec.Refund{{ID: "R-1", Kind: rec.KindRefund, PaymentID: "P-1", Amount: dec("5"), Status: rec.RefundRequested}}
			return f
		}, []want{{rec.MissingEffect, rec.ServicePayment, rec.ActionRepublish}}},
		{"paid but not reserved, and the money not given back", func() rec.Facts {
			f := paid()
			f.Inventory = rec.Inventory{Status: rec.InventoryRejected, Reason: "INSUFFICIENT_STOCK", Items: f.Inventory.Items}
			return f
		}, []want{{rec.BusinessRejection, rec.ServiceInventory, rec.ActionManualReview}}},
		{"paid but not reserved, and only part of the money given back", func() rec.Facts {
			f := refunded(paid(), "R-1", "5.00", -5)
			f.Inventory = rec.Inventory{Status: rec.InventoryRejected, Reason: "INSUFFICIENT_STOCK", Items: f.Inventory.Items}
			return f
		}, []want{{rec.BusinessRejection, rec.ServiceInventory, rec.ActionManualReview}}},
		{"a shortage compensated: the money back and the order cancelled", outOfStock, nil},
		{"a shortage compensated, but the points never reversed", func() rec.Facts {
			f := outOfStock()
			f.Points.Entries = f.Points.Entries[:1]
			return f
		}, []want{{rec.MissingEffect, rec.ServicePoints, rec.ActionRepublish}}},
		{"stock deducted for an order never paid", func() rec.Facts {
			f := cancelled()
			f.Payment = rec.Payment{}
			f.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "SKU-1", Quantity: 2}}}
			return f
		}, []want{{rec.ExtraEffect, rec.ServiceInventory, rec.ActionManualReview}}},
		{"paid, but the order still waits for the callback", func() rec.Facts {
			f := cancelled()
			f.Order.Status, f.Order.Version, f.Order.Events = rec.StatusPendingPayment, 2, f.Order.Events[:2]
			f.Payment.Outbox = []rec.OutboxRow{sent("C-1", "PAYMENT_SUCCEEDED", 2)}
			return f
		}, []want{{rec.MissingEffect, rec.ServiceOrder, rec.ActionRepublish}}},
		{"an order the order service does not know", func() rec.Facts { return rec.Facts{Order: rec.Order{ID: "O-x"}} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			findings := rec.Compare(tt.facts(), stuckBefore)
			var got []want
			for _, f := range findings {
				got = append(got, want{f.Kind, f.Service, f.Action.Type})
				if f.OrderID != tt.facts().Order.ID || f.Expected == "" || f.Actual == "" {
					t.Errorf("finding %+v lacks its order, expectation or observation", f)
				}
				if f.Action.Type != rec.ActionManualReview && f.Action.Key == "" {
					t.Errorf("finding %+v: an automatic action without a key could be taken twice", f)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("findings %+v\nwant %+v", findings, tt.want)
			}
			converged := len(tt.want) == 0
			if rec.Converged(findings) != converged {
				t.Fatalf("Converged = %v, want %v", !converged, converged)
			}
		})
	}
}

// TestCompensations checks the details of the actions that move money or
// messages: which refund, which rows, which dead letter.
func TestCompensations(t *testing.T) {
	f := cancelled()
	a := rec.Compare(f, stuckBefore)[0].Action
	again := rec.Compare(cancelled(), stuckBefore)[0].Action
	if a.PaymentID != "P-1" || !a.Amount.Equal(dec("20")) || a.RefundID == "" || a.RefundID != again.RefundID || a.Key != again.Key {
		t.Fatalf("refund %+v then %+v: want the whole 20.00 of P-1 under one refund id and key", a, again)
	}
	// When the order asked for the return itself, the same refund id keeps
	// the normal path and the compensation from refunding twice.
	f.Order.Refunds = []rec.Refund{{ID: "R-return", Kind: rec.KindPaymentReturn, PaymentID: "P-1", Amount: dec("20"), Status: rec.RefundRequested}}
	if a := rec.Compare(f, stuckBefore)[0].Action; a.RefundID != "R-return" {
		t.Fatalf("refund id %s, want the order's R-return", a.RefundID)
	}

	lost := paid()
	lost.Inventory = rec.Inventory{Status: rec.InventoryNone}
	lost.Points = rec.Points{}
	findings := rec.Compare(lost, stuckBefore)
	if len(findings) != 2 || findings[0].Action.Key != findings[1].Action.Key {
		t.Fatalf("findings %+v: two services missing the same events share one republish", findings)
	}
	if ids := findings[0].Action.EventIDs; !slices.Equal(ids, []string{"E-1", "E-2", "E-3"}) {
		t.Fatalf("republish %v, want every event of the order, oldest first", ids)
	}

	dead := paid()
	dead.Points = rec.Points{Dead: []rec.DeadLetter{{ID: 7, EventID: "E-3", EventType: "OrderPaid"}}}
	if a := rec.Compare(dead, stuckBefore)[0].Action; a.DeadLetterID != 7 || a.Service != rec.ServicePoints {
		t.Fatalf("replay %+v, want dead letter 7 of points", a)
	}
}
