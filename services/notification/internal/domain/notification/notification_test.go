package notification_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
)

func TestNotify(t *testing.T) {
	facts := func(k notification.Kind) notification.Facts {
		return notification.Facts{Kind: k, OrderID: "O-1", CustomerID: "C-1", EventID: "E-1", Amount: "80.00",
			Currency: "CNY", Reason: notification.ReasonRefundExceedsPayment}
	}
	tests := []struct {
		name      string
		state     notification.State
		kind      notification.Kind
		wantState notification.State
		wantBody  string
		wantErr   error
	}{
		{
			name: "paid", state: notification.StateNone, kind: notification.KindOrderPaid,
			wantState: notification.StatePaidNotified,
			wantBody:  "We received your payment of 80.00 CNY for order O-1. We are preparing your items.",
		},
		{
			name: "refunded", state: notification.StatePaidNotified, kind: notification.KindOrderRefunded,
			wantState: notification.StateRefundedNotified,
			wantBody:  "Your refund of 80.00 CNY for order O-1 is complete.",
		},
		{
			name: "refund declined keeps the order paid", state: notification.StatePaidNotified,
			kind: notification.KindRefundRejected, wantState: notification.StatePaidNotified,
			wantBody: "Your refund request of 80.00 CNY for order O-1 was declined: it is more than what is left of your payment.",
		},
		{name: "paid twice", state: notification.StatePaidNotified, kind: notification.KindOrderPaid, wantErr: notification.ErrIllegalTransition},
		{name: "refunded before paid", state: notification.StateNone, kind: notification.KindOrderRefunded, wantErr: notification.ErrIllegalTransition},
		{
			name: "a second refund", state: notification.StateRefundedNotified, kind: notification.KindOrderRefunded,
			wantState: notification.StateRefundedNotified,
			wantBody:  "Your refund of 80.00 CNY for order O-1 is complete.",
		},
		{
			name: "declined after a refund keeps the order where it was", state: notification.StateRefundedNotified,
			kind: notification.KindRefundRejected, wantState: notification.StateRefundedNotified,
			wantBody: "Your refund request of 80.00 CNY for order O-1 was declined: it is more than what is left of your payment.",
		},
		{
			name: "a payment returned after the order was cancelled", state: notification.StateNone, kind: notification.KindPaymentReturned,
			wantState: notification.StateReturnNotified,
			wantBody:  "Your payment of 80.00 CNY reached order O-1 after it was cancelled; it has been returned to you in full.",
		},
		{name: "returned after paid", state: notification.StatePaidNotified, kind: notification.KindPaymentReturned, wantErr: notification.ErrIllegalTransition},
		{name: "unknown kind", state: notification.StateNone, kind: "ORDER_SHIPPED", wantErr: notification.ErrUnknownKind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := notification.Order{ID: "O-1", State: tt.state}
			ch, err := o.Notify(facts(tt.kind))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Notify() error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			n := ch.Notification
			if ch.State != tt.wantState || n.Body != tt.wantBody || n.Kind != tt.kind ||
				n.Channel != notification.ChannelInApp || n.EventID != "E-1" || n.CustomerID != "C-1" || n.OrderID != "O-1" {
				t.Fatalf("Notify() = %+v, want state %s and body %q", ch, tt.wantState, tt.wantBody)
			}
		})
	}
}

func TestDeclineReasonWithoutCode(t *testing.T) {
	got := notification.Body(notification.Facts{Kind: notification.KindRefundRejected, OrderID: "O-1", Amount: "1.00", Currency: "CNY", Reason: "SOMETHING_NEW"})
	want := "Your refund request of 1.00 CNY for order O-1 was declined: please contact support."
	if got != want {
		t.Fatalf("Body() = %q, want %q", got, want)
	}
}

func TestFrom(t *testing.T) {
	tests := []struct {
		kind notification.Kind
		want []notification.State
	}{
		{notification.KindOrderPaid, []notification.State{notification.StateNone}},
		{notification.KindOrderRefunded, []notification.State{notification.StatePaidNotified, notification.StateRefundedNotified}},
		{notification.KindRefundRejected, []notification.State{notification.StatePaidNotified, notification.StateRefundedNotified}},
		{notification.KindPaymentReturned, []notification.State{notification.StateNone}},
		{"ORDER_SHIPPED", nil},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			got := notification.From(tt.kind)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("From(%s) = %v, want %v", tt.kind, got, tt.want)
			}
		})
	}
}
