package devrun_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

func TestWalkthroughBodiesAreJSON(t *testing.T) {
	for _, body := range []string{devrun.StockBody, devrun.OrderBody, devrun.PaymentBody, devrun.WantSnapshot} {
		if !json.Valid([]byte(body)) {
			t.Errorf("not JSON: %s", body)
		}
	}
}

func TestWalkthrough(t *testing.T) {
	moved := suite.Services()
	moved[0].Port = 9181 // order
	tests := []struct {
		name     string
		services []suite.Service
		console  string
		want     []string
		wantNot  []string
	}{
		{"the suite", suite.Services(), "http://127.0.0.1:8087", []string{
			"curl -sS -X PUT http://127.0.0.1:8083/inventory/SKU-1 -H 'Content-Type: application/json' -d '" + devrun.StockBody + "'",
			"curl -sS -X POST http://127.0.0.1:8081/orders -H 'Content-Type: application/json' -d '" + devrun.OrderBody + "'",
			"curl -sS -X POST http://127.0.0.1:8081/orders/O-1001/checkout",
			"curl -sS -X POST http://127.0.0.1:8082/payments -H 'Content-Type: application/json' -d '" + devrun.PaymentBody + "'",
			"curl -sS http://127.0.0.1:8081/orders/O-1001/snapshot",
			devrun.WantSnapshot,
			"kcat -C -b 127.0.0.1:9092 -t order-events -e",
			"notification-service   http://127.0.0.1:8085",
			"console                http://127.0.0.1:8087",
			"http://127.0.0.1:8087/orders/O-1001",
		}, nil},
		{"ports follow the table", moved, "", []string{"http://127.0.0.1:9181/orders/O-1001/checkout"}, []string{":8081", "console"}},
		{"no curl without the order service", suite.Services()[1:], "", []string{"kcat"}, []string{"curl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			devrun.Walkthrough(&b, tt.services, "127.0.0.1:9092,127.0.0.1:9093", tt.console)
			for _, want := range tt.want {
				if !strings.Contains(b.String(), want) {
					t.Errorf("walk-through lacks %q:\n%s", want, b.String())
				}
			}
			for _, not := range tt.wantNot {
				if strings.Contains(b.String(), not) {
					t.Errorf("walk-through has %q:\n%s", not, b.String())
				}
			}
		})
	}
}
