package harness_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/tests/harness"
)

// reports records what a Contract reports.
type reports []string

func (r *reports) Errorf(format string, args ...any) { *r = append(*r, fmt.Sprintf(format, args...)) }

// TestContractReportsAnAnswerOutsideTheDocument serves the order
// service's committed OpenAPI document beside answers of GET /orders/{id}
// and checks that the transport passes the answers the document describes
// and reports, naming the route, each one it does not.
func TestContractReportsAnAnswerOutsideTheDocument(t *testing.T) {
	doc, err := os.ReadFile("../../services/order/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	const order = `{"orderId":"O-1","status":"PAID","version":3,"amount":"80.00","currency":"CNY","customerId":"C-1",` +
		`"items":[{"sku":"SKU-1","quantity":2,"unitPrice":"40.00"}],"refundedAmount":"0.00","refunds":[],"returnedItems":[]}`
	tests := []struct {
		name   string
		status int
		body   string
		want   string // a part of the report; empty: none
	}{
		{"the order", http.StatusOK, order, ""},
		{"an error answer", http.StatusNotFound, `{"businessCode":"ORDER_NOT_FOUND","message":"no order O-1"}`, ""},
		{"a version as a string", http.StatusOK, strings.Replace(order, `"version":3`, `"version":"3"`, 1), "GET /orders/O-1 answered 200"},
		{"a required field missing", http.StatusOK, strings.Replace(order, `"status":"PAID",`, "", 1), "status"},
		{"an error without its code", http.StatusConflict, `{"message":"no"}`, "answered 409"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path == "/openapi.json" {
					_, _ = w.Write(doc)
					return
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			var got reports
			contract := harness.NewContract(&got, http.DefaultTransport)
			resp, err := (&http.Client{Transport: contract}).Get(srv.URL + "/orders/O-1")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != tt.body {
				t.Fatalf("the caller read %q (%v), want the answer unchanged", body, err)
			}
			if contract.Checked() != 1 {
				t.Fatalf("checked %d answers, want 1", contract.Checked())
			}
			switch {
			case tt.want == "" && len(got) > 0:
				t.Fatalf("reported %q for an answer the document describes", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Fatalf("reports %q, want one containing %q", got, tt.want)
			}
		})
	}
}
