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
		wantErr    error // nil: success; errAny: some other error
	}{
		{"O-1", "PENDING_PAYMENT", "80.00", nil},
		{"O/2", "PAID", "1.50", nil},
		{"O-404", "", "", payment.ErrOrderNotFound},
		{"O-500", "", "", errAny},
		{"O-503", "", "", errAny},
		{"O-stuck", "", "", errAny},
		{"O-bad", "", "", errAny},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			o, err := c.Order(context.Background(), tt.id)
			switch {
			case tt.wantErr == nil:
				if err != nil {
					t.Fatal(err)
				}
				if o.ID != tt.id || o.Status != tt.wantStatus || o.Amount.StringFixed(2) != tt.wantAmount {
					t.Fatalf("order %+v", o)
				}
			case tt.wantErr == errAny:
				if err == nil || errors.Is(err, payment.ErrOrderNotFound) {
					t.Fatalf("error = %v, want a failure other than not found", err)
				}
			default:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
			}
		})
	}
}

var errAny = errors.New("any error but not found")
