package inventory_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
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

func TestAggregate(t *testing.T) {
	tests := []struct {
		name    string
		lines   []inventory.Line
		want    []inventory.Line
		wantErr error
	}{
		{
			name:  "sums repeated SKUs and sorts",
			lines: []inventory.Line{{SKU: "B", Quantity: 1}, {SKU: "A", Quantity: 2}, {SKU: "B", Quantity: 3}},
			want:  []inventory.Line{{SKU: "A", Quantity: 2}, {SKU: "B", Quantity: 4}},
		},
		{name: "zero quantity", lines: []inventory.Line{{SKU: "A", Quantity: 0}}, wantErr: ruleBroken},
		{name: "negative quantity", lines: []inventory.Line{{SKU: "A", Quantity: -1}}, wantErr: ruleBroken},
		{name: "quantity above the rule", lines: []inventory.Line{{SKU: "A", Quantity: rules.MaxQuantity + 1}}, wantErr: ruleBroken},
		{
			name:    "sum overflows the stock range",
			lines:   slices.Repeat([]inventory.Line{{SKU: "A", Quantity: rules.MaxQuantity}}, inventory.MaxStock/rules.MaxQuantity+1),
			wantErr: inventory.ErrInvalidQuantity,
		},
		{
			// The largest sum the stock column holds is still accepted.
			name: "sum of exactly the stock range",
			lines: append(slices.Repeat([]inventory.Line{{SKU: "A", Quantity: rules.MaxQuantity}}, inventory.MaxStock/rules.MaxQuantity),
				inventory.Line{SKU: "A", Quantity: inventory.MaxStock % rules.MaxQuantity}),
			want: []inventory.Line{{SKU: "A", Quantity: inventory.MaxStock}},
		},
		{name: "empty SKU", lines: []inventory.Line{{SKU: "", Quantity: 1}}, wantErr: ruleBroken},
		{name: "SKU with a space", lines: []inventory.Line{{SKU: "SKU 1", Quantity: 1}}, wantErr: ruleBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := inventory.Aggregate(tt.lines)
			if !matches(err, tt.wantErr) {
				t.Fatalf("Aggregate() error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Aggregate() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPay(t *testing.T) {
	none := inventory.Order{ID: "O-1", Status: inventory.StatusNone}
	tests := []struct {
		name      string
		order     inventory.Order
		lines     []inventory.Line
		available map[string]int
		want      inventory.Change
		wantErr   error
	}{
		{
			name:      "enough stock deducts every line",
			order:     none,
			lines:     []inventory.Line{{SKU: "B", Quantity: 1}, {SKU: "A", Quantity: 2}, {SKU: "A", Quantity: 1}},
			available: map[string]int{"A": 3, "B": 5},
			want: inventory.Change{
				Order: inventory.Order{ID: "O-1", Status: inventory.StatusDeducted,
					Items: []inventory.Line{{SKU: "A", Quantity: 3}, {SKU: "B", Quantity: 1}}},
				Movements: []inventory.Movement{
					{SKU: "A", Delta: -3, Kind: inventory.KindDeduct},
					{SKU: "B", Delta: -1, Kind: inventory.KindDeduct},
				},
			},
		},
		{
			name:      "one short SKU rejects the whole order",
			order:     none,
			lines:     []inventory.Line{{SKU: "A", Quantity: 2}, {SKU: "B", Quantity: 1}},
			available: map[string]int{"A": 1, "B": 5},
			want: inventory.Change{
				Order: inventory.Order{ID: "O-1", Status: inventory.StatusRejected, Reason: inventory.ReasonInsufficientStock,
					Items: []inventory.Line{{SKU: "A", Quantity: 2}, {SKU: "B", Quantity: 1}}},
				Shortages: []inventory.Shortage{{SKU: "A", Requested: 2, Available: 1}},
			},
		},
		{
			name:      "unknown SKU counts as none available",
			order:     none,
			lines:     []inventory.Line{{SKU: "GHOST", Quantity: 1}},
			available: map[string]int{},
			want: inventory.Change{
				Order: inventory.Order{ID: "O-1", Status: inventory.StatusRejected, Reason: inventory.ReasonInsufficientStock,
					Items: []inventory.Line{{SKU: "GHOST", Quantity: 1}}},
				Shortages: []inventory.Shortage{{SKU: "GHOST", Requested: 1, Available: 0}},
			},
		},
		{
			name:    "already deducted is illegal",
			order:   inventory.Order{ID: "O-1", Status: inventory.StatusDeducted},
			lines:   []inventory.Line{{SKU: "A", Quantity: 1}},
			wantErr: inventory.ErrIllegalTransition,
		},
		{
			name:    "invalid line",
			order:   none,
			lines:   []inventory.Line{{SKU: "A", Quantity: 0}},
			wantErr: ruleBroken,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.order.Pay(tt.lines, tt.available)
			if !matches(err, tt.wantErr) {
				t.Fatalf("Pay() error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Pay() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRefund(t *testing.T) {
	items := []inventory.Line{{SKU: "A", Quantity: 3}, {SKU: "B", Quantity: 1}}
	deducted := inventory.Order{ID: "O-1", Status: inventory.StatusDeducted, Items: items}
	partly := inventory.Order{ID: "O-1", Status: inventory.StatusPartiallyRestocked, Items: items,
		Restocked: []inventory.Line{{SKU: "A", Quantity: 1}}}
	restocked := inventory.Order{ID: "O-1", Status: inventory.StatusRestocked, Items: items, Restocked: items}
	rejected := inventory.Order{ID: "O-2", Status: inventory.StatusRejected, Reason: inventory.ReasonInsufficientStock,
		Items: []inventory.Line{{SKU: "A", Quantity: 9}}}
	restock := func(sku string, n int) inventory.Movement {
		return inventory.Movement{SKU: sku, Delta: n, Kind: inventory.KindRestock}
	}
	tests := []struct {
		name     string
		order    inventory.Order
		returned []inventory.Line
		want     inventory.Change
		wantErr  error
	}{
		{
			name: "every item returned restocks exactly what was taken", order: deducted, returned: items,
			want: inventory.Change{Order: inventory.Order{ID: "O-1", Status: inventory.StatusRestocked, Items: items, Restocked: items},
				Movements: []inventory.Movement{restock("A", 3), restock("B", 1)}},
		},
		{
			name: "a refund of money alone restocks nothing", order: deducted, returned: nil,
			want: inventory.Change{Order: deducted},
		},
		{
			name: "one unit back of three", order: deducted, returned: []inventory.Line{{SKU: "A", Quantity: 1}},
			want: inventory.Change{Order: partly, Movements: []inventory.Movement{restock("A", 1)}},
		},
		{
			name: "the running total restocks only what is new", order: partly, returned: []inventory.Line{{SKU: "A", Quantity: 2}, {SKU: "B", Quantity: 1}},
			want: inventory.Change{Order: inventory.Order{ID: "O-1", Status: inventory.StatusPartiallyRestocked, Items: items,
				Restocked: []inventory.Line{{SKU: "A", Quantity: 2}, {SKU: "B", Quantity: 1}}},
				Movements: []inventory.Movement{restock("A", 1), restock("B", 1)}},
		},
		{
			name: "never more than was deducted", order: deducted, returned: []inventory.Line{{SKU: "A", Quantity: 9}, {SKU: "Z", Quantity: 1}},
			want: inventory.Change{Order: inventory.Order{ID: "O-1", Status: inventory.StatusPartiallyRestocked, Items: items,
				Restocked: []inventory.Line{{SKU: "A", Quantity: 3}}},
				Movements: []inventory.Movement{restock("A", 3)}},
		},
		{
			name: "a later refund of money after every item came back", order: restocked, returned: items,
			want: inventory.Change{Order: restocked},
		},
		{name: "rejected order has nothing to restock", order: rejected, returned: items, want: inventory.Change{Order: rejected}},
		{name: "never paid is illegal", order: inventory.Order{ID: "O-3", Status: inventory.StatusNone}, returned: items, wantErr: inventory.ErrIllegalTransition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.order.Refund(tt.returned)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Refund() error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Refund() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"zero available", inventory.ValidateAvailable(0), nil},
		{"negative available", inventory.ValidateAvailable(-1), inventory.ErrInvalidAvailable},
		{"the most available", inventory.ValidateAvailable(inventory.MaxStock), nil},
		{"too much available", inventory.ValidateAvailable(inventory.MaxStock + 1), inventory.ErrInvalidAvailable},
		{"plain SKU", inventory.ValidateSKU("SKU-1"), nil},
		{"SKU with space", inventory.ValidateSKU("SKU 1"), ruleBroken},
		{"long SKU", inventory.ValidateSKU(string(make([]byte, 129))), ruleBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !matches(tt.err, tt.want) {
				t.Fatalf("got %v, want %v", tt.err, tt.want)
			}
		})
	}
}
