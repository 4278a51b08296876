package event_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// BenchmarkParse measures a consumer's cost per message: the generic
// validator over three decodes (reference) against the compiled checkers
// over one scan (compiled).
func BenchmarkParse(b *testing.B) {
	var paid, refunded []byte
	for _, raw := range examples(b) {
		env, err := event.Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		switch {
		case env.EventType == event.OrderPaid && paid == nil:
			paid = raw
		case env.EventType == event.OrderRefunded && env.EventVersion == 2:
			refunded = raw
		}
	}
	parsers := []struct {
		name  string
		parse func([]byte) (event.Envelope, error)
	}{
		{"reference", event.ParseReference},
		{"compiled", event.Parse},
	}
	events := []struct {
		name string
		raw  []byte
	}{
		{"OrderPaid.v1", paid},
		{"OrderRefunded.v2", refunded},
	}
	for _, p := range parsers {
		b.Run(p.name, func(b *testing.B) {
			for _, ev := range events {
				b.Run(ev.name, func(b *testing.B) {
					b.ReportAllocs()
					b.SetBytes(int64(len(ev.raw)))
					for b.Loop() {
						if _, err := p.parse(ev.raw); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkValueRules measures one call of a value rule function as the
// points consumer makes it per event (ValidatePositiveAmount) and as the
// order service makes them per request: the generic validator over the
// definition (reference, what the functions ran before) against the
// compiled checker (compiled).
func BenchmarkValueRules(b *testing.B) {
	paid := decimal.RequireFromString("80.00")
	rules := []struct {
		name      string
		compiled  func() error
		reference func() error
	}{
		{
			"ValidatePositiveAmount",
			func() error { return event.ValidatePositiveAmount("paidAmount", paid) },
			func() error {
				return event.CheckRuleReference("paidAmount", event.RulePositiveAmount, paid.String(), paid.String())
			},
		},
		{
			"ValidateID",
			func() error { return event.ValidateID("orderId", "O-1001") },
			func() error {
				return event.CheckRuleReference("orderId", event.RuleID, "O-1001", strconv.Quote("O-1001"))
			},
		},
		{
			"ValidateQuantity",
			func() error { return event.ValidateQuantity("quantity", 2) },
			func() error { return event.CheckRuleReference("quantity", event.RuleQuantity, json.Number("2"), "2") },
		},
	}
	for _, r := range rules {
		for _, impl := range []struct {
			name  string
			check func() error
		}{{"reference", r.reference}, {"compiled", r.compiled}} {
			b.Run(impl.name+"/"+r.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := impl.check(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
