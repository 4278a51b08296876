package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// BenchmarkRelay measures the relay from committed rows to broker
// acknowledgement: b.N OrderPaid rows of distinct orders are committed
// first, then the clock runs while the relay drains them into kfake.
func BenchmarkRelay(b *testing.B) {
	for _, batch := range []int{100, 500, 2000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			db, br, topic := setup(b)
			template := paid(b, topic, "O-template", 3)
			const chunk = 1000
			for start := 0; start < b.N; start += chunk {
				if err := postgres.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
					for i := start; i < min(start+chunk, b.N); i++ {
						m := template
						m.EventID = fmt.Sprintf("E-bench-%d", i)
						m.AggregateID = fmt.Sprintf("O-bench-%d", i)
						if err := outbox.Add(context.Background(), tx, m); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			relay := newRelayWith(b, db, br, batch)
			b.ResetTimer()
			start := time.Now()
			for sent := 0; sent < b.N; {
				n, err := relay.RunOnce(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				sent += n
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}
