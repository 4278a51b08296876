package shipping_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/reliable-orders/fulfillment/examples/shipping/internal/domain/shipping"
	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// ruleBroken stands for any *rules.RuleError in the tables below.
var ruleBroken = &rules.RuleError{}

// matches reports whether err is want, or any rule error when want is
// ruleBroken.
func matches(err, want error) bool {
	if errors.Is(want, ruleBroken) {
		var rerr *rules.RuleError
		return errors.As(err, &rerr)
	}
	return errors.Is(err, want)
}

func lines(pairs ...any) []shipping.Line {
	out := []shipping.Line{}
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, shipping.Line{SKU: pairs[i].(string), Quantity: pairs[i+1].(int)})
	}
	return out
}

func TestPay(t *testing.T) {
	tests := []struct {
		name    string
		status  shipping.Status
		items   []shipping.Line
		want    []shipping.Line
		wantErr error
	}{
		{name: "ships the order's goods, one line per SKU, sorted", status: shipping.StatusNone,
			items: lines("B", 1, "A", 2, "B", 3), want: lines("A", 2, "B", 4)},
		{name: "paid twice is illegal", status: shipping.StatusToShip, items: lines("A", 1), wantErr: shipping.ErrIllegalTransition},
		{name: "paid after a cancel is illegal", status: shipping.StatusCancelled, items: lines("A", 1), wantErr: shipping.ErrIllegalTransition},
		{name: "no lines", status: shipping.StatusNone, items: lines(), wantErr: ruleBroken},
		{name: "zero quantity", status: shipping.StatusNone, items: lines("A", 0), wantErr: ruleBroken},
		{name: "quantity above the rule", status: shipping.StatusNone, items: lines("A", rules.MaxQuantity+1), wantErr: ruleBroken},
		{name: "SKU with a space", status: shipping.StatusNone, items: lines("SKU 1", 1), wantErr: ruleBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := shipping.Shipment{OrderID: "O-1", Status: tt.status}.Pay(tt.items)
			if !matches(err, tt.wantErr) {
				t.Fatalf("Pay() error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			want := shipping.Shipment{OrderID: "O-1", Status: shipping.StatusToShip, Ordered: tt.want, ToShip: tt.want}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Pay() = %+v, want %+v", got, want)
			}
		})
	}
}

// TestRefund: what is left to ship is what was ordered less the running
// total of returned goods, whatever refunds came before, and it never
// grows back.
func TestRefund(t *testing.T) {
	ordered := lines("A", 2, "B", 1)
	toShip := func(ls ...any) shipping.Shipment {
		return shipping.Shipment{OrderID: "O-1", Status: shipping.StatusToShip, Ordered: ordered, ToShip: lines(ls...)}
	}
	cancelled := shipping.Shipment{OrderID: "O-1", Status: shipping.StatusCancelled, Ordered: ordered, ToShip: lines()}
	tests := []struct {
		name     string
		shipment shipping.Shipment
		returned []shipping.Line
		want     shipping.Shipment
		wantErr  error
	}{
		{name: "part of the goods back leaves the rest to ship", shipment: toShip("A", 2, "B", 1),
			returned: lines("A", 1), want: toShip("A", 1, "B", 1)},
		{name: "every unit back cancels", shipment: toShip("A", 2, "B", 1),
			returned: lines("B", 1, "A", 2), want: cancelled},
		{name: "a running total counts earlier refunds once", shipment: toShip("A", 1, "B", 1),
			returned: lines("A", 1, "B", 1), want: toShip("A", 1)},
		{name: "an earlier refund never applied here still counts", shipment: toShip("A", 2, "B", 1),
			returned: lines("A", 1, "B", 1), want: toShip("A", 1)},
		{name: "a refund of money alone changes nothing", shipment: toShip("A", 2, "B", 1),
			returned: lines(), want: toShip("A", 2, "B", 1)},
		{name: "more back than ordered cancels", shipment: toShip("A", 2, "B", 1),
			returned: lines("A", 5, "B", 1), want: cancelled},
		{name: "a SKU the order did not have is ignored", shipment: toShip("A", 2, "B", 1),
			returned: lines("Z", 1), want: toShip("A", 2, "B", 1)},
		{name: "goods never come back onto the shipment", shipment: toShip("B", 1),
			returned: lines("A", 1), want: toShip("B", 1)},
		{name: "a later refund of a cancelled shipment changes nothing", shipment: cancelled,
			returned: lines("A", 1), want: cancelled},
		{name: "refunded before it was paid is illegal", shipment: shipping.Shipment{OrderID: "O-1", Status: shipping.StatusNone},
			returned: lines("A", 1), wantErr: shipping.ErrIllegalTransition},
		{name: "a returned line that breaks a rule", shipment: toShip("A", 2, "B", 1),
			returned: lines("A", -1), wantErr: ruleBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.shipment.Refund(tt.returned)
			if !matches(err, tt.wantErr) {
				t.Fatalf("Refund() error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Refund() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
