package event_test

import (
	"testing"

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
