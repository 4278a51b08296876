package event_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

const tutorialOrderPaid = `{"eventId":"E-1001","eventType":"OrderPaid","eventVersion":1,
 "occurredAt":"2026-08-10T02:00:00Z","aggregateId":"O-1001","aggregateVersion":3,
 "traceId":"4bf92f3577b34da6","producer":"order-service",
 "data":{"paymentId":"P-1001","paidAmount":"80.00","currency":"CNY","customerId":"C-1","items":[{"sku":"SKU-1","quantity":2}]}}`

func TestParseAcceptsTheDesignExample(t *testing.T) {
	env, err := event.Parse([]byte(tutorialOrderPaid))
	if err != nil {
		t.Fatal(err)
	}
	var data event.OrderPaidData
	if err := env.DecodeData(&data); err != nil {
		t.Fatal(err)
	}
	if env.AggregateVersion != 3 || data.PaidAmount.String() != "80.00" || data.Items[0].Quantity != 2 {
		t.Fatalf("decoded %+v %+v", env, data)
	}
}

func TestParseRejects(t *testing.T) {
	mutate := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(tutorialOrderPaid), &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := []struct {
		name   string
		raw    string
		reason string
	}{
		{"not json", `{"eventId":`, event.ReasonInvalidJSON},
		{"unknown version", mutate(func(m map[string]any) { m["eventVersion"] = 9 }), event.ReasonUnknownVersion},
		{"unknown type", mutate(func(m map[string]any) { m["eventType"] = "OrderShipped" }), event.ReasonUnknownVersion},
		{"missing eventId", mutate(func(m map[string]any) { delete(m, "eventId") }), event.ReasonSchemaViolation},
		{"float money", mutate(func(m map[string]any) { m["data"].(map[string]any)["paidAmount"] = 80.0 }), event.ReasonSchemaViolation},
		{"local time", mutate(func(m map[string]any) { m["occurredAt"] = "2026-08-10T10:00:00+08:00" }), event.ReasonSchemaViolation},
		{"zero quantity", mutate(func(m map[string]any) {
			m["data"].(map[string]any)["items"] = []any{map[string]any{"sku": "S", "quantity": 0}}
		}), event.ReasonSchemaViolation},
		{"missing data field", mutate(func(m map[string]any) { delete(m["data"].(map[string]any), "paymentId") }), event.ReasonSchemaViolation},
		// The value rules (rules.json) hold on every field that carries them.
		{"sku with a space", mutate(func(m map[string]any) {
			m["data"].(map[string]any)["items"] = []any{map[string]any{"sku": "SKU 1", "quantity": 1}}
		}), event.ReasonSchemaViolation},
		{"quantity above the maximum", mutate(func(m map[string]any) {
			m["data"].(map[string]any)["items"] = []any{map[string]any{"sku": "S", "quantity": 1000001}}
		}), event.ReasonSchemaViolation},
		{"zero paid amount", mutate(func(m map[string]any) { m["data"].(map[string]any)["paidAmount"] = "0.00" }), event.ReasonSchemaViolation},
		{"three decimal places", mutate(func(m map[string]any) { m["data"].(map[string]any)["paidAmount"] = "1.005" }), event.ReasonSchemaViolation},
		{"amount above the maximum", mutate(func(m map[string]any) { m["data"].(map[string]any)["paidAmount"] = "10000000000000000" }), event.ReasonSchemaViolation},
		{"aggregate id with a slash", mutate(func(m map[string]any) { m["aggregateId"] = "O/1" }), event.ReasonSchemaViolation},
		{"customer id with a space", mutate(func(m map[string]any) { m["data"].(map[string]any)["customerId"] = "C 1" }), event.ReasonSchemaViolation},
		// encoding/json would read these keys into the fields they only
		// resemble, past the schema, which matches names exactly.
		{"payload key differing only in case", mutate(func(m map[string]any) { m["data"].(map[string]any)["PaidAmount"] = "-5" }), event.ReasonSchemaViolation},
		{"envelope key differing only in case", mutate(func(m map[string]any) { m["EVENTID"] = "not an id!" }), event.ReasonSchemaViolation},
		{"item key differing only in case", mutate(func(m map[string]any) {
			m["data"].(map[string]any)["items"] = []any{map[string]any{"sku": "S", "quantity": 1, "Quantity": 0}}
		}), event.ReasonSchemaViolation},
		{"kelvin sign folds to k", mutate(func(m map[string]any) {
			m["data"].(map[string]any)["items"] = []any{map[string]any{"sKu": "S 1", "sku": "S", "quantity": 1}}
		}), event.ReasonSchemaViolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := event.Parse([]byte(tt.raw))
			var inv *event.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Parse error = %v, want *InvalidError", err)
			}
			if inv.Reason != tt.reason {
				t.Fatalf("reason = %s, want %s (%v)", inv.Reason, tt.reason, err)
			}
		})
	}
}

func TestNewFillsTheEnvelope(t *testing.T) {
	amount, _ := event.ParseMoney("80")
	env, err := event.New(event.OrderPaid, event.Meta{AggregateID: "O-1", AggregateVersion: 3, Producer: "order-service"},
		event.OrderPaidData{PaymentID: "P-1", PaidAmount: amount, Currency: "CNY", CustomerID: "C-1",
			Items: []event.Item{{SKU: "SKU-1", Quantity: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"paidAmount":"80.00"`, `"eventVersion":1`, `"aggregateVersion":3`, `"eventId":"E-`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("%s missing %s", raw, want)
		}
	}
	if len(env.TraceID) != 32 || !strings.HasPrefix(env.Traceparent(), "00-"+env.TraceID+"-") {
		t.Errorf("trace %q / %q", env.TraceID, env.Traceparent())
	}
	if env.OccurredAt.Location().String() != "UTC" {
		t.Errorf("occurredAt not UTC: %v", env.OccurredAt)
	}
}

func TestNewRefusesAnInvalidEvent(t *testing.T) {
	_, err := event.New(event.OrderPaid, event.Meta{AggregateID: "O-1", AggregateVersion: 3, Producer: "p"}, event.OrderPaidData{})
	if err == nil {
		t.Fatal("an OrderPaid without payment id and items was accepted")
	}
}

func TestRefundedDataReadsEveryVersion(t *testing.T) {
	money := func(s string) event.Money { m, _ := event.ParseMoney(s); return m }
	meta := event.Meta{AggregateID: "O-1", AggregateVersion: 5, Producer: "order-service"}
	items := []event.Item{{SKU: "SKU-1", Quantity: 2}}
	v1Meta := meta
	v1Meta.EventVersion = 1
	v1, err := event.New(event.OrderRefunded, v1Meta, event.OrderRefundedV1Data{RefundID: "R-1", PaymentID: "P-1",
		RefundedAmount: money("80"), Currency: "CNY", CustomerID: "C-1", Items: items})
	if err != nil {
		t.Fatal(err)
	}
	v2Meta := meta
	v2Meta.EventVersion = 2
	v2, err := event.New(event.OrderRefunded, v2Meta, event.OrderRefundedData{RefundID: "R-2", PaymentID: "P-1",
		RefundedAmount: money("0.01"), TotalRefundedAmount: money("10.01"), Currency: "CNY", CustomerID: "C-1",
		Items: []event.Item{}, TotalReturnedItems: items})
	if err != nil {
		t.Fatal(err)
	}
	v3, err := event.New(event.OrderRefunded, meta, event.OrderRefundedData{RefundID: "R-3", PaymentID: "P-1",
		RefundedAmount: money("0"), TotalRefundedAmount: money("80"), Currency: "CNY", CustomerID: "C-1",
		Items: items, TotalReturnedItems: items})
	if err != nil {
		t.Fatal(err)
	}
	if v1.EventVersion != 1 || v2.EventVersion != 2 || v3.EventVersion != event.CurrentVersion(event.OrderRefunded) || v3.EventVersion != 3 {
		t.Fatalf("versions %d, %d and %d", v1.EventVersion, v2.EventVersion, v3.EventVersion)
	}
	v2Zero := v2Meta
	if _, err := event.New(event.OrderRefunded, v2Zero, event.OrderRefundedData{RefundID: "R-3", PaymentID: "P-1",
		RefundedAmount: money("0"), TotalRefundedAmount: money("80"), Currency: "CNY", CustomerID: "C-1",
		Items: items, TotalReturnedItems: items}); err == nil {
		t.Fatal("a v2 refund of no money was accepted: only v3 may carry one")
	}
	tests := []struct {
		name                string
		env                 event.Envelope
		amount, total       string
		items, totalReturns int
	}{
		// v1: the order's only refund, which returned every item.
		{"v1", v1, "80.00", "80.00", 1, 1},
		// v2: a refund of money alone after an earlier one returned goods.
		{"v2", v2, "0.01", "10.01", 0, 1},
		// v3: goods returned after their money came back, no money now.
		{"v3", v3, "0.00", "80.00", 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := tt.env.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			env, err := event.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			d, err := env.RefundedData()
			if err != nil {
				t.Fatal(err)
			}
			if d.RefundedAmount.String() != tt.amount || d.TotalRefundedAmount.String() != tt.total ||
				len(d.Items) != tt.items || len(d.TotalReturnedItems) != tt.totalReturns {
				t.Fatalf("decoded %+v", d)
			}
		})
	}
}

// TestKnownNamesEveryEventWithASchema: every type with a schema is known,
// so a type added with its schema cannot be skipped as unknown, and a
// name that is not an order event is not.
func TestKnownNamesEveryEventWithASchema(t *testing.T) {
	names, err := fs.Glob(event.Schemas, "schemas/*.v*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("schemas: %v, %v", names, err)
	}
	for _, name := range names {
		typ, _, _ := strings.Cut(path.Base(name), ".")
		if !event.Type(typ).Known() {
			t.Errorf("%s has a schema but is not Known", typ)
		}
	}
	for _, typ := range []event.Type{"", "Bogus", "orderpaid", "OrderPaid "} {
		if typ.Known() {
			t.Errorf("%q is Known", typ)
		}
	}
}
