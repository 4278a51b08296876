package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/app"
	"github.com/reliable-orders/fulfillment/services/inventory/inventoryapi"
)

// adapter is how the conformance suite reads what the
// service did for an order: the order's status, the stock of its SKU, its
// movements and the version guard's position.
type adapter struct{}

// Prepare stocks the order's SKU.
func (adapter) Prepare(s *servicetest.Service, o consumertest.Order) { setStock(s, o.SKU, 10) }

func (adapter) Effect(s *servicetest.Service, o consumertest.Order) string {
	st := stock(s, o.SKU)
	pos := consumertest.Position(s, o.ID)
	return fmt.Sprintf("%s; %d available, %d deducted; %v; at v%d %s",
		status(s, o.ID), st.Available, st.Deducted, movements(s, o.ID), pos.Version, pos.State)
}

func (adapter) Want(o consumertest.Order, stage consumertest.Stage) string {
	switch stage {
	case consumertest.Paid:
		return fmt.Sprintf("DEDUCTED; 8 available, 2 deducted; [DEDUCT %s -2]; at v3 DEDUCTED", o.SKU)
	case consumertest.Refunded:
		return fmt.Sprintf("RESTOCKED; 10 available, 0 deducted; [DEDUCT %[1]s -2 RESTOCK %[1]s 2]; at v5 RESTOCKED", o.SKU)
	}
	return "NONE; 10 available, 0 deducted; []; at v0 NONE"
}

func TestConformance(t *testing.T) {
	consumertest.Run(t, consumertest.Features{Consumer: "inventory-service", FailPoint: app.FailPoint, App: "internal/app"}, run, adapter{})
}

func setStock(s *servicetest.Service, sku string, available int) {
	s.T().Helper()
	if code, _ := s.Do(http.MethodPut, "/inventory/"+sku, fmt.Sprintf(`{"available":%d}`, available)); code != http.StatusOK {
		s.T().Fatalf("PUT /inventory/%s: %d", sku, code)
	}
}

func stock(s *servicetest.Service, sku string) inventoryapi.StockResponse {
	s.T().Helper()
	var out inventoryapi.StockResponse
	s.GetJSON("/inventory/"+sku, &out)
	return out
}

func status(s *servicetest.Service, orderID string) string {
	s.T().Helper()
	var out inventoryapi.OrderResponse
	s.GetJSON("/inventory/orders/"+orderID, &out)
	return out.Status
}

// movements lists an order's stock movements as "KIND SKU delta", in order.
func movements(s *servicetest.Service, orderID string) []string {
	s.T().Helper()
	var out inventoryapi.MovementsResponse
	s.GetJSON("/inventory/orders/"+orderID+"/movements", &out)
	moves := make([]string, len(out.Movements))
	for i, m := range out.Movements {
		moves[i] = fmt.Sprintf("%s %s %d", m.Kind, m.SKU, m.Delta)
	}
	return moves
}

func TestService(t *testing.T) {
	s := servicetest.Start(t, run, nil)

	t.Run("insufficient stock rejects the order without retry or DLQ", func(t *testing.T) {
		s.Bind(t)
		setStock(s, "SHORT-1", 1)
		setStock(s, "SHORT-2", 5)
		s.Publish(consumertest.OrderPaid(t, "O-short", "80.00", consumertest.Item("SHORT-2", 1), consumertest.Item("SHORT-1", 2)))
		s.Drained("inventory-service")

		if got := status(s, "O-short"); got != "REJECTED" {
			t.Fatalf("status = %s, want REJECTED", got)
		}
		if a, b := stock(s, "SHORT-1"), stock(s, "SHORT-2"); a.Available != 1 || b.Available != 5 || a.Deducted+b.Deducted != 0 {
			t.Fatalf("stock changed: %+v %+v", a, b)
		}
		if got := movements(s, "O-short"); len(got) != 0 {
			t.Fatalf("movements = %v, want none", got)
		}
		if n := s.DeadLetters("O-short").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})
}

func TestHTTPValidation(t *testing.T) {
	s := servicetest.Start(t, run, nil)
	setStock(s, "SKU-1", 7)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		want   int
	}{
		{"known SKU", http.MethodGet, "/inventory/SKU-1", "", http.StatusOK},
		{"unknown SKU", http.MethodGet, "/inventory/NOPE", "", http.StatusNotFound},
		{"zero stock", http.MethodPut, "/inventory/SKU-2", `{"available":0}`, http.StatusOK},
		{"negative stock", http.MethodPut, "/inventory/SKU-1", `{"available":-1}`, http.StatusBadRequest},
		{"fractional stock", http.MethodPut, "/inventory/SKU-1", `{"available":1.5}`, http.StatusBadRequest},
		{"string stock", http.MethodPut, "/inventory/SKU-1", `{"available":"5"}`, http.StatusBadRequest},
		{"stock beyond the range", http.MethodPut, "/inventory/SKU-1", `{"available":2147483648}`, http.StatusBadRequest},
		{"missing field", http.MethodPut, "/inventory/SKU-1", `{}`, http.StatusBadRequest},
		{"empty body", http.MethodPut, "/inventory/SKU-1", ``, http.StatusBadRequest},
		{"malformed JSON", http.MethodPut, "/inventory/SKU-1", `{"available":`, http.StatusBadRequest},
		{"oversize body", http.MethodPut, "/inventory/SKU-1", `{"pad":"` + strings.Repeat("x", 1<<20) + `"}`, http.StatusRequestEntityTooLarge},
		{"unknown order is NONE", http.MethodGet, "/inventory/orders/O-unknown", "", http.StatusOK},
		{"movements of unknown order", http.MethodGet, "/inventory/orders/O-unknown/movements", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.Bind(t)
			if got, _ := s.Do(tt.method, tt.path, tt.body); got != tt.want {
				t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, got, tt.want)
			}
		})
	}
	s.Bind(t)
	if st := stock(s, "SKU-1"); st.Available != 7 {
		t.Fatalf("rejected requests changed stock: %+v", st)
	}
	if got := status(s, "O-unknown"); got != "NONE" {
		t.Fatalf("unknown order status = %s, want NONE", got)
	}
}

// TestOpenAPIDocument: the service serves the committed openapi.json, and
// started, so every route it registers is in it and vice versa.
func TestOpenAPIDocument(t *testing.T) {
	servicetest.StartWithoutBroker(t, run, nil).CheckOpenAPI("openapi.json")
}
