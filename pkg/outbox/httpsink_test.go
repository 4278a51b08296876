package outbox_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// TestHTTPSinkKeepsEachAggregatesOrder posts callbacks of several orders in
// parallel; each order's callbacks must arrive in order, and a failure must
// stop that order's later callbacks and cut the delivered prefix there.
func TestHTTPSinkKeepsEachAggregatesOrder(t *testing.T) {
	msgs := []outbox.Message{
		{EventID: "A-1", AggregateID: "A"}, {EventID: "B-1", AggregateID: "B"},
		{EventID: "A-2", AggregateID: "A"}, {EventID: "C-1", AggregateID: "C"},
		{EventID: "B-2", AggregateID: "B"}, {EventID: "A-3", AggregateID: "A"},
		{EventID: "B-3", AggregateID: "B"}, {EventID: "C-2", AggregateID: "C"},
	}
	tests := []struct {
		name     string
		failing  string // the event id the receiver refuses
		wantSent int
		wantErr  bool
		// wantSeen is what the receiver got per aggregate, in arrival order.
		wantSeen map[string][]string
	}{
		{
			name: "every callback accepted", wantSent: len(msgs),
			wantSeen: map[string][]string{"A": {"A-1", "A-2", "A-3"}, "B": {"B-1", "B-2", "B-3"}, "C": {"C-1", "C-2"}},
		},
		{
			name: "a refused callback stops its order only", failing: "B-2", wantSent: 4, wantErr: true,
			wantSeen: map[string][]string{"A": {"A-1", "A-2", "A-3"}, "B": {"B-1"}, "C": {"C-1", "C-2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[string][]string{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := r.Header.Get("X-Event-Id")
				if id == tt.failing {
					http.Error(w, "refused", http.StatusInternalServerError)
					return
				}
				mu.Lock()
				agg := id[:1]
				seen[agg] = append(seen[agg], id)
				mu.Unlock()
			}))
			defer srv.Close()
			withIDs := make([]outbox.Message, len(msgs))
			for i, m := range msgs {
				m.Headers = map[string]string{"Event-Id": m.EventID}
				m.Payload = []byte(`{}`)
				withIDs[i] = m
			}
			sink := outbox.NewHTTPSink(srv.Client(), srv.URL, []byte("s"))
			sent, err := sink.Send(context.Background(), withIDs)
			if sent != tt.wantSent || (err != nil) != tt.wantErr {
				t.Fatalf("Send = %d, %v; want %d, error %v", sent, err, tt.wantSent, tt.wantErr)
			}
			for agg, want := range tt.wantSeen {
				if !slices.Equal(seen[agg], want) {
					t.Fatalf("received for %s: %v, want %v", agg, seen[agg], want)
				}
			}
		})
	}
}

// TestHTTPSinkSignsTimestampAndBody checks that each callback carries a
// signature the receiver verifies with the sink's secret, at a timestamp
// of now.
func TestHTTPSinkSignsTimestampAndBody(t *testing.T) {
	secret := []byte("the-callback-secret-of-32-bytes-or-more")
	got := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = event.VerifyCallback([][]byte{secret}, body, r.Header.Get(event.SignatureTimestampHeader),
				r.Header.Get(event.SignatureHeader), time.Now(), 5*time.Second)
		}
		got <- err
	}))
	defer srv.Close()
	sink := outbox.NewHTTPSink(srv.Client(), srv.URL, secret)
	if _, err := sink.Send(context.Background(), []outbox.Message{{EventID: "A-1", AggregateID: "A", Payload: []byte(`{"a":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the receiver refused the signature: %v", err)
	}
}
