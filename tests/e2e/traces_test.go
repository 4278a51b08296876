package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// span is a span as GET /admin/traces shows it.
type span struct {
	TraceID      string            `json:"traceId"`
	SpanID       string            `json:"spanId"`
	ParentSpanID string            `json:"parentSpanId"`
	Name         string            `json:"name"`
	Service      string            `json:"service"`
	Attributes   map[string]string `json:"attributes"`
	Links        []struct {
		TraceID string `json:"traceId"`
		SpanID  string `json:"spanId"`
	} `json:"links"`
}

// traceSpans reads the spans of traceID that service kept.
func traceSpans(t *testing.T, s *harness.Suite, service, traceID string) []span {
	t.Helper()
	code, raw, err := s.API().Raw(t.Context(), service, http.MethodGet, "/admin/traces?traceId="+traceID, nil, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("%s GET /admin/traces: %d %s %v", service, code, raw, err)
	}
	var out struct {
		Spans []span `json:"spans"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s GET /admin/traces: %v: %s", service, err, raw)
	}
	return out.Spans
}

// find returns the first span of spans named name whose attribute key is
// value (any value when key is empty).
func find(spans []span, name, key, value string) (span, bool) {
	for _, sp := range spans {
		if sp.Name == name && (key == "" || sp.Attributes[key] == value) {
			return sp, true
		}
	}
	return span{}, false
}

// A payment's trace, started by the client's traceparent, runs through
// every process the payment touches: the payment service's request, its
// outbox write and the relay's callback, the order service's callback
// request, its outbox write and the relay's send of OrderPaid to Kafka,
// and each consumer's span of that message and of the transaction that
// applied it. Each span is the child of the one before it across the
// process boundaries (HTTP header, outbox row, Kafka header); the apply
// transaction links the message it applied.
func TestPaymentTraceCrossesEveryService(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-T", 10)
	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	amount := s.CreateOrder(harness.Order{ID: "O-T1", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-T", Quantity: 1, UnitPrice: "10.00"}}})
	header := http.Header{"Traceparent": {"00-" + traceID + "-" + clientSpan + "-01"}}
	code, raw, err := s.API().Raw(t.Context(), suiteapi.Payment, http.MethodPost, "/payments", header,
		suiteapi.PaymentRequest{OrderID: "O-T1", Amount: amount, Currency: "CNY"})
	if err != nil || code != http.StatusOK {
		t.Fatalf("pay: %d %s %v", code, raw, err)
	}
	s.WaitSnapshot("O-T1", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 1, Notifications: 1, DLQ: 0}, 30*time.Second)

	consumers := []string{"inventory", "points", "notification"}
	spans := map[string][]span{}
	// The consumers' spans end as their transactions commit, a moment
	// after the effects the snapshot reads are visible.
	s.WaitUntil(10*time.Second, "every service's spans of the trace", func() bool {
		for _, svc := range append([]string{"payment", "order"}, consumers...) {
			spans[svc] = traceSpans(t, s, svc, traceID)
		}
		for _, svc := range consumers {
			if _, ok := find(spans[svc], "inbox apply", "", ""); !ok {
				return false
			}
		}
		_, ok := find(spans["order"], "outbox send "+s.Topic, "event.type", "OrderPaid")
		return ok
	})
	for svc, list := range spans {
		for _, sp := range list {
			if sp.TraceID != traceID {
				t.Errorf("%s span %s in trace %s, want %s", svc, sp.Name, sp.TraceID, traceID)
			}
		}
	}
	must := func(svc, name, key, value string) span {
		t.Helper()
		sp, ok := find(spans[svc], name, key, value)
		if !ok {
			t.Fatalf("%s has no span %q (%s=%s) in the trace; it has %+v", svc, name, key, value, spans[svc])
		}
		return sp
	}
	parent := func(child, parent span) {
		t.Helper()
		if child.ParentSpanID != parent.SpanID {
			t.Errorf("%s %q: parent %s, want %s %q (%s)", child.Service, child.Name, child.ParentSpanID, parent.Service, parent.Name, parent.SpanID)
		}
	}
	pay := must("payment", "POST /payments", "", "")
	if pay.ParentSpanID != clientSpan {
		t.Errorf("POST /payments: parent %s, want the client's %s", pay.ParentSpanID, clientSpan)
	}
	payWrite := must("payment", "outbox write", "event.type", "PAYMENT_SUCCEEDED")
	parent(payWrite, pay)
	callbackSend := must("payment", "outbox send order-callbacks", "event.type", "PAYMENT_SUCCEEDED")
	parent(callbackSend, payWrite)
	callback := must("order", "POST /payments/callback", "", "")
	parent(callback, callbackSend)
	paidWrite := must("order", "outbox write", "event.type", "OrderPaid")
	parent(paidWrite, callback)
	paidSend := must("order", "outbox send "+s.Topic, "event.type", "OrderPaid")
	parent(paidSend, paidWrite)
	for _, svc := range consumers {
		consume := must(svc, "consume "+s.Topic, "event.id", paidSend.Attributes["event.id"])
		parent(consume, paidSend)
		linked := false
		for _, apply := range spans[svc] {
			if apply.Name != "inbox apply" {
				continue
			}
			for _, l := range apply.Links {
				linked = linked || l.SpanID == consume.SpanID
			}
		}
		if !linked {
			t.Errorf("%s: no inbox apply span links the OrderPaid message's span %s: %+v", svc, consume.SpanID, spans[svc])
		}
	}
}
