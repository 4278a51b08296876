package adapters_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

func TestOrder(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/orders/O-1":
			_, _ = io.WriteString(w, `{"orderId":"O-1","status":"PENDING_PAYMENT","version":2,"amount":"80.00","currency":"CNY","customerId":"C-1","items":[]}`)
		case "/orders/O%2F2":
			_, _ = io.WriteString(w, `{"orderId":"O/2","status":"PAID","version":3,"amount":"1.50","currency":"USD"}`)
		case "/orders/O-bad":
			_, _ = io.WriteString(w, `{"orderId":"O-bad","amount":80}`)
		case "/orders/O-500":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/orders/O-503":
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"businessCode":"OVERLOADED","message":"at capacity"}`, http.StatusServiceUnavailable)
		case "/orders/O-stuck":
			<-r.Context().Done() // answers only once the client gave up
		default:
			http.Error(w, `{"businessCode":"NOT_FOUND"}`, http.StatusNotFound)
		}
	}))
	defer ts.Close()
	c := adapters.NewOrderClient(ts.Client(), ts.URL+"/", "")

	tests := []struct {
		id         string
		wantStatus string
		wantAmount string
		wantErr    error // nil and not otherErr: success
		otherErr   bool  // a failure other than not found
	}{
		{"O-1", "PENDING_PAYMENT", "80.00", nil, false},
		{"O/2", "PAID", "1.50", nil, false},
		{"O-404", "", "", payment.ErrOrderNotFound, false},
		{"O-500", "", "", nil, true},
		{"O-503", "", "", nil, true},
		{"O-stuck", "", "", nil, true},
		{"O-bad", "", "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			o, err := c.Order(context.Background(), tt.id)
			switch {
			case tt.otherErr:
				if err == nil || errors.Is(err, payment.ErrOrderNotFound) {
					t.Fatalf("error = %v, want a failure other than not found", err)
				}
			case tt.wantErr == nil:
				if err != nil {
					t.Fatal(err)
				}
				if o.ID != tt.id || o.Status != tt.wantStatus || o.Amount.StringFixed(2) != tt.wantAmount {
					t.Fatalf("order %+v", o)
				}
			default:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
			}
		})
	}
}
