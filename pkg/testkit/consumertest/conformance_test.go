package consumertest_test

import (
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
)

func TestFeaturesValidate(t *testing.T) {
	tests := []struct {
		name    string
		f       consumertest.Features
		wantErr []string
	}{
		{"complete", consumertest.Features{Consumer: "c", FailPoint: "c.apply"}, nil},
		{"ignoring refunds", consumertest.Features{Consumer: "c", FailPoint: "c.apply", IgnoresRefunds: true}, nil},
		{"no consumer", consumertest.Features{FailPoint: "c.apply"}, []string{"Consumer"}},
		{"no fail point", consumertest.Features{Consumer: "c"}, []string{"FailPoint"}},
		{"nothing", consumertest.Features{}, []string{"Consumer", "FailPoint"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.Validate()
			if (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Validate() = %v, want an error naming %v", err, tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to name %s", err, w)
				}
			}
		})
	}
}

// The suite's orders and builders make events the contract accepts.
func TestBuildersMakeValidEvents(t *testing.T) {
	o := consumertest.NewOrder("O-1")
	if o != (consumertest.Order{ID: "O-1", SKU: "SKU-O-1", Customer: "C-O-1"}) {
		t.Fatalf("order %+v", o)
	}
	lines := consumertest.Items(consumertest.Item(o.SKU, consumertest.Units))
	envs := []event.Envelope{
		consumertest.Event(t, event.OrderPaid, o.ID, 3, consumertest.PaidData(o.Customer, consumertest.PaidAmount, lines...)),
		consumertest.Event(t, event.OrderRefunded, o.ID, 5, consumertest.RefundedData(o.Customer, consumertest.PaidAmount, lines, lines)),
		consumertest.EventV(t, event.OrderRefunded, o.ID, 5, 1, event.OrderRefundedV1Data{RefundID: "R-1", PaymentID: "P-1",
			RefundedAmount: consumertest.Money("80.00"), Currency: "CNY", CustomerID: o.Customer, Items: lines}),
	}
	for _, env := range envs {
		raw, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := event.Parse(raw); err != nil {
			t.Errorf("%s v%d: %v", env.EventType, env.EventVersion, err)
		}
	}
	if got := consumertest.Items(); got == nil || len(got) != 0 {
		t.Errorf("Items() = %#v, want an empty list, not null", got)
	}
}
