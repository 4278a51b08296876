package messaging_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/messaging"
)

// A queued record must not keep its fetch alive: its copy shares no byte
// with the batch it was read from, and keeps what the subscription reads
// of it (the message, its metadata, its commit mark).
func TestDetachedRecordSharesNothingWithItsBatch(t *testing.T) {
	tests := []struct {
		name string
		rec  kgo.Record
	}{
		{name: "key, value and headers", rec: kgo.Record{Key: []byte("O-1"), Value: []byte(`{"eventId":"E-1"}`),
			Headers: []kgo.RecordHeader{{Key: "_watermill_message_uuid", Value: []byte("E-1")}, {Key: "traceparent", Value: []byte("00-ab-cd-01")}}}},
		{name: "no key, no headers", rec: kgo.Record{Value: []byte(`{}`)}},
		{name: "an empty header value", rec: kgo.Record{Key: []byte("O-2"), Value: []byte(`{}`), Headers: []kgo.RecordHeader{{Key: "x", Value: []byte{}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The batch: every byte of the record in one buffer, as a fetch
			// decompresses it.
			var batch []byte
			place := func(b []byte) []byte {
				if b == nil {
					return nil
				}
				at := len(batch)
				batch = append(batch, b...)
				return batch[at:len(batch):len(batch)]
			}
			batch = make([]byte, 0, 256)
			r := tt.rec
			r.Key, r.Value = place(r.Key), place(r.Value)
			r.Headers = append([]kgo.RecordHeader(nil), r.Headers...)
			for i := range r.Headers {
				r.Headers[i].Value = place(r.Headers[i].Value)
			}
			r.Topic, r.Partition, r.Offset, r.LeaderEpoch, r.Timestamp = "order-events", 7, 42, 3, time.Unix(1, 0)

			d := messaging.Detach(&r)

			if d == &r {
				t.Fatal("Detach returned the fetched record itself")
			}
			if !bytes.Equal(d.Key, tt.rec.Key) || !bytes.Equal(d.Value, tt.rec.Value) || (d.Key == nil) != (tt.rec.Key == nil) {
				t.Errorf("key %q value %q, want %q %q", d.Key, d.Value, tt.rec.Key, tt.rec.Value)
			}
			if d.Topic != r.Topic || d.Partition != r.Partition || d.Offset != r.Offset || d.LeaderEpoch != r.LeaderEpoch || !d.Timestamp.Equal(r.Timestamp) {
				t.Errorf("position %s/%d@%d epoch %d at %v, want %s/%d@%d epoch %d at %v",
					d.Topic, d.Partition, d.Offset, d.LeaderEpoch, d.Timestamp, r.Topic, r.Partition, r.Offset, r.LeaderEpoch, r.Timestamp)
			}
			if len(d.Headers) != len(tt.rec.Headers) {
				t.Fatalf("%d headers, want %d", len(d.Headers), len(tt.rec.Headers))
			}
			for i, h := range d.Headers {
				if h.Key != tt.rec.Headers[i].Key || !bytes.Equal(h.Value, tt.rec.Headers[i].Value) {
					t.Errorf("header %d = %s=%q, want %s=%q", i, h.Key, h.Value, tt.rec.Headers[i].Key, tt.rec.Headers[i].Value)
				}
			}
			// Overwrite the batch: a copy that still pointed into it would
			// change with it.
			for i := range batch {
				batch[i] = '#'
			}
			if !bytes.Equal(d.Key, tt.rec.Key) || !bytes.Equal(d.Value, tt.rec.Value) {
				t.Errorf("after the batch changed: key %q value %q, want %q %q", d.Key, d.Value, tt.rec.Key, tt.rec.Value)
			}
			for i, h := range d.Headers {
				if !bytes.Equal(h.Value, tt.rec.Headers[i].Value) {
					t.Errorf("after the batch changed: header %d = %q, want %q", i, h.Value, tt.rec.Headers[i].Value)
				}
			}
		})
	}
}
