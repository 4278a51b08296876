package points_test

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
)

// ruleBroken stands for any *event.RuleError in the tables below.
var ruleBroken = &event.RuleError{}

func TestPointsFor(t *testing.T) {
	tests := []struct {
		amount  string
		want    int64
		wantErr bool
	}{
		{"80.00", 80, false},
		{"80.99", 80, false},
		{"0.99", 0, false},
		{"0", 0, false},
		// The largest amount the order service accepts: more than an INT
		// holds, so the ledger is BIGINT.
		{"9999999999999999.99", 9999999999999999, false},
		{"10000000000000000", 0, true},
		{"-1.00", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.amount, func(t *testing.T) {
			got, err := points.PointsFor(decimal.RequireFromString(tt.amount))
			var rerr *event.RuleError
			if errors.As(err, &rerr) != tt.wantErr || got != tt.want {
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
		wantPoints *int64 // nil: no entry
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
			event: "paid", amount: "10000000000000000", wantErr: ruleBroken},
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
			var rerr *event.RuleError
			if tt.wantErr == ruleBroken && !errors.As(err, &rerr) || tt.wantErr != ruleBroken && !errors.Is(err, tt.wantErr) {
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

func ptr(n int64) *int64 { return &n }
