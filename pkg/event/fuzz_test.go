package event_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/testkit/rulestest"
)

// examples returns one valid envelope of every (eventType, eventVersion)
// as a producer writes it: the fuzz targets' seeds.
func examples(tb testing.TB) [][]byte {
	tb.Helper()
	m := func(s string) event.Money { return event.NewMoney(decimal.RequireFromString(s)) }
	items := []event.Item{{SKU: "SKU-1", Quantity: 2}, {SKU: "SKU-2", Quantity: 1}}
	type example struct {
		t       event.Type
		version int
		data    any
	}
	list := []example{
		{event.OrderCreated, 1, event.OrderCreatedData{CustomerID: "C-1", Currency: "CNY", Amount: m("80.00"),
			Items: []event.PricedItem{{SKU: "SKU-1", Quantity: 2, UnitPrice: m("40.00")}}}},
		{event.OrderCheckedOut, 1, event.OrderCheckedOutData{CustomerID: "C-1", Currency: "CNY", Amount: m("80.00")}},
		{event.OrderPaid, 1, event.OrderPaidData{PaymentID: "P-1", PaidAmount: m("80.00"), Currency: "CNY", CustomerID: "C-1", Items: items}},
		{event.OrderRefundRequested, 1, event.OrderRefundRequestedData{RefundID: "R-1", PaymentID: "P-1", Amount: m("0.01"), Currency: "CNY"}},
		{event.OrderRefunded, 1, event.OrderRefundedV1Data{RefundID: "R-1", PaymentID: "P-1", RefundedAmount: m("80.00"),
			Currency: "CNY", CustomerID: "C-1", Items: items}},
		{event.OrderRefunded, 2, event.OrderRefundedData{RefundID: "R-2", PaymentID: "P-1", RefundedAmount: m("20.5"),
			TotalRefundedAmount: m("60.50"), Currency: "CNY", CustomerID: "C-1", Items: []event.Item{},
			TotalReturnedItems: []event.Item{{SKU: "SKU-1", Quantity: 1}}}},
		{event.OrderRefundRejected, 1, event.OrderRefundRejectedData{RefundID: "R-3", Amount: m("9999999999999999.99"),
			Currency: "CNY", CustomerID: "C-1", Reason: "REFUND_EXCEEDS_PAYMENT"}},
		{event.OrderCancelled, 1, event.OrderCancelledData{CustomerID: "C-1", Reason: "CANCELLED_ON_REQUEST"}},
		{event.OrderPaymentRejected, 1, event.OrderPaymentRejectedData{PaymentID: "P-2", RefundID: rules.ReturnRefundID("P-2"),
			Amount: m("80.00"), Currency: "CNY", CustomerID: "C-1", Reason: "ORDER_CANCELLED"}},
		{event.OrderPaymentReturned, 1, event.OrderPaymentReturnedData{PaymentID: "P-2", RefundID: rules.ReturnRefundID("P-2"),
			Amount: m("80.00"), Currency: "CNY", CustomerID: "C-1"}},
	}
	out := [][]byte{[]byte(tutorialOrderPaid)}
	for i, ex := range list {
		env, err := event.New(ex.t, event.Meta{AggregateID: "O-1001", AggregateVersion: int64(i + 1), Producer: "order-service",
			OccurredAt: time.Date(2026, 8, 10, 2, 0, 0, 123e6, time.UTC), EventVersion: ex.version}, ex.data)
		if err != nil {
			tb.Fatalf("example %s v%d: %v", ex.t, ex.version, err)
		}
		raw, err := env.Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, raw)
	}
	return out
}

// typedData decodes env's payload into the struct a consumer reads it into.
func typedData(env event.Envelope) (any, error) {
	var v any
	switch {
	case env.EventType == event.OrderCreated:
		v = &event.OrderCreatedData{}
	case env.EventType == event.OrderCheckedOut:
		v = &event.OrderCheckedOutData{}
	case env.EventType == event.OrderPaid:
		v = &event.OrderPaidData{}
	case env.EventType == event.OrderRefundRequested:
		v = &event.OrderRefundRequestedData{}
	case env.EventType == event.OrderRefunded && env.EventVersion == 1:
		v = &event.OrderRefundedV1Data{}
	case env.EventType == event.OrderRefunded:
		v = &event.OrderRefundedData{}
	case env.EventType == event.OrderRefundRejected:
		v = &event.OrderRefundRejectedData{}
	case env.EventType == event.OrderCancelled:
		v = &event.OrderCancelledData{}
	case env.EventType == event.OrderPaymentRejected:
		v = &event.OrderPaymentRejectedData{}
	case env.EventType == event.OrderPaymentReturned:
		v = &event.OrderPaymentReturnedData{}
	default:
		return nil, errors.New("no payload type for " + string(env.EventType))
	}
	if err := env.DecodeData(v); err != nil {
		return nil, err
	}
	return v, nil
}

// sameEnvelope compares two envelopes field by field, the payload as
// compact JSON: Marshal compacts it.
func sameEnvelope(a, b event.Envelope) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a.Data) != nil || json.Compact(&cb, b.Data) != nil {
		return false
	}
	return a.EventID == b.EventID && a.EventType == b.EventType && a.EventVersion == b.EventVersion &&
		a.OccurredAt.Equal(b.OccurredAt) && a.AggregateID == b.AggregateID && a.AggregateVersion == b.AggregateVersion &&
		a.TraceID == b.TraceID && a.Producer == b.Producer && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// FuzzParse: Parse never panics, refuses with an *InvalidError, and what
// it accepts is within the contract as a consumer reads it: the envelope
// re-marshals and parses again to the same envelope, and its payload,
// decoded into its struct and written again with event.New, is valid too.
func FuzzParse(f *testing.F) {
	for _, raw := range examples(f) {
		f.Add(raw)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"eventId":`))
	// Control characters in a reason, escaped and raw: NUL, a line break,
	// DEL and a C1 control.
	for _, reason := range []string{"a\x00b", "two\nlines", "del\x7f", "next\u0085line"} {
		f.Add(withReason(f, reason))
	}
	f.Add(bytes.Replace(withReason(f, "REASON"), []byte("REASON"), []byte("a\x00\x1f\x7f\xc2\x9fb"), 1))
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, err := event.Parse(raw)
		if err != nil {
			var inv *event.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Parse error %v is not an *InvalidError", err)
			}
			return
		}
		again, err := env.Marshal()
		if err != nil {
			t.Fatalf("accepted %s\nbut its envelope does not marshal: %v", raw, err)
		}
		back, err := event.Parse(again)
		if err != nil {
			t.Fatalf("accepted %s\nbut not its re-marshalled form %s: %v", raw, again, err)
		}
		if !sameEnvelope(env, back) {
			t.Fatalf("accepted %s\nas %+v, which parses again as %+v", raw, env, back)
		}
		data, err := typedData(env)
		if err != nil {
			t.Fatalf("accepted %s\nbut its payload does not decode: %v", raw, err)
		}
		if _, err := event.New(env.EventType, event.Meta{AggregateID: env.AggregateID, AggregateVersion: env.AggregateVersion,
			Producer: env.Producer, TraceID: env.TraceID, OccurredAt: env.OccurredAt, EventVersion: env.EventVersion}, data); err != nil {
			t.Fatalf("accepted %s\nbut the payload a consumer decodes from it, %+v, breaks the contract: %v", raw, data, err)
		}
	})
}

// verdict is a rule function's or the schema's answer: accepted or not.
func verdict(err error) string {
	if err == nil {
		return "accepted"
	}
	return "refused (" + err.Error() + ")"
}

// withField returns the tutorial's OrderPaid with one payload field set to
// v, or with its first item's quantity set to v.
func withField(tb testing.TB, field string, v any) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(tutorialOrderPaid), &m); err != nil {
		tb.Fatal(err)
	}
	data := m["data"].(map[string]any)
	switch field {
	case "quantity":
		data["items"] = []any{map[string]any{"sku": "SKU-1", "quantity": v}}
	case "sku":
		data["items"] = []any{map[string]any{"sku": v, "quantity": 1}}
	default:
		data[field] = v
	}
	raw, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// withReason returns an OrderCancelled whose reason is reason.
func withReason(tb testing.TB, reason string) []byte {
	tb.Helper()
	raw, err := json.Marshal(map[string]any{"eventId": "E-1", "eventType": event.OrderCancelled, "eventVersion": 1,
		"occurredAt": "2026-08-10T02:00:00Z", "aggregateId": "O-1", "aggregateVersion": 2, "traceId": "4bf92f3577b34da6",
		"producer": "order-service", "data": map[string]any{"customerId": "C-1", "reason": reason}})
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// FuzzRulesAgreeWithSchemas: the value rules a service checks a client's
// input with (ValidateID, ParsePositiveAmount, ValidateCurrency,
// ValidateQuantity, ValidateReason) accept exactly what the event schemas
// accept in the fields that carry them, so a value a service accepted is
// never dead-lettered downstream and a value the schemas admit is never
// refused at the door. pkg/rules' FuzzRulesAgreeWithTheReferenceValidator
// holds each to the generic validator evaluating its definition, error
// included.
func FuzzRulesAgreeWithSchemas(f *testing.F) {
	rulestest.AddSeeds(f)
	f.Fuzz(func(t *testing.T, id, amount, currency string, quantity int, reason string) {
		agree := func(field string, rule error, raw []byte) {
			t.Helper()
			schema := event.Validate(raw)
			if (rule == nil) != (schema == nil) {
				t.Fatalf("%s: the rule says %s, the schema %s", field, verdict(rule), verdict(schema))
			}
		}
		_, amountErr := rules.ParsePositiveAmount("paidAmount", amount)
		agree("paymentId "+rulestest.Quote(id), rules.ValidateID("paymentId", id), withField(t, "paymentId", id))
		agree("sku "+rulestest.Quote(id), rules.ValidateID("sku", id), withField(t, "sku", id))
		agree("paidAmount "+rulestest.Quote(amount), amountErr, withField(t, "paidAmount", amount))
		agree("currency "+rulestest.Quote(currency), rules.ValidateCurrency("currency", currency), withField(t, "currency", currency))
		agree("quantity", rules.ValidateQuantity("quantity", quantity), withField(t, "quantity", quantity))
		agree("reason "+rulestest.Quote(reason), rules.ValidateReason("reason", reason), withReason(t, reason))
	})
}
