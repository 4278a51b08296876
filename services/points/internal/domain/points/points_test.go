package points_test

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
)

func TestPointsFor(t *testing.T) {
	tests := []struct {
		amount  string
		want    int
		wantErr error
	}{
		{"80.00", 80, nil},
		{"80.99", 80, nil},
		{"0.99", 0, nil},
		{"0", 0, nil},
		{"2147483647.9999", points.MaxPoints, nil},
		{"2147483648", 0, points.ErrInvalidAmount},
		{"-1.00", 0, points.ErrInvalidAmount},
	}
	for _, tt := range tests {
		t.Run(tt.amount, func(t *testing.T) {
			got, err := points.PointsFor(decimal.RequireFromString(tt.amount))
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("PointsFor(%s) = %d, %v; want %d, %v", tt.amount, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestPayAndRefund(t *testing.T) {
	tests := []struct {
		name       string
		order      points.Order
		event      string // "paid" or "refunded"
		amount     string
		wantState  points.State
		wantPoints *int // nil: no entry
		wantReject string
		wantErr    error
	}{
		{name: "paid earns floor of the amount", order: points.Order{State: points.StateNone},
			event: "paid", amount: "80.50", wantState: points.StateEarned, wantPoints: ptr(80)},
		{name: "paid twice is illegal", order: points.Order{State: points.StateEarned, Points: 80},
			event: "paid", amount: "80.00", wantErr: points.ErrIllegalTransition},
		{name: "refund reverses floor of the amount", order: points.Order{State: points.StateEarned, Points: 80},
			event: "refunded", amount: "30.75", wantState: points.StateReversed, wantPoints: ptr(-30)},
		{name: "refund of everything reaches exactly zero", order: points.Order{State: points.StateEarned, Points: 80},
			event: "refunded", amount: "80.00", wantState: points.StateReversed, wantPoints: ptr(-80)},
		{name: "refund below zero is rejected without an entry", order: points.Order{State: points.StateEarned, Points: 10},
			event: "refunded", amount: "20.00", wantState: points.StateReversalRejected, wantReject: points.ReasonBelowZero},
		{name: "refund before earning is illegal", order: points.Order{State: points.StateNone},
			event: "refunded", amount: "1.00", wantErr: points.ErrIllegalTransition},
		{name: "out-of-range amount", order: points.Order{State: points.StateNone},
			event: "paid", amount: "99999999999", wantErr: points.ErrInvalidAmount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			amount := decimal.RequireFromString(tt.amount)
			var ch points.Change
			var err error
			if tt.event == "paid" {
				ch, err = tt.order.Pay(amount)
			} else {
				ch, err = tt.order.Refund(amount)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if ch.State != tt.wantState || ch.Rejection != tt.wantReject {
				t.Fatalf("change = %+v, want state %s rejection %q", ch, tt.wantState, tt.wantReject)
			}
			switch {
			case tt.wantPoints == nil && ch.Entry != nil:
				t.Fatalf("entry = %+v, want none", *ch.Entry)
			case tt.wantPoints != nil && (ch.Entry == nil || ch.Entry.Points != *tt.wantPoints || !ch.Entry.Amount.Equal(amount)):
				t.Fatalf("entry = %+v, want %d points for %s", ch.Entry, *tt.wantPoints, amount)
			}
		})
	}
}

func ptr(n int) *int { return &n }
