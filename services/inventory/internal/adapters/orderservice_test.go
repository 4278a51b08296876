package adapters_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/adapters"
)

// TestOrderServiceSignsStockCallbacks checks that a callback the relay
// hands the order service arrives at the stock callback route, with the
// body it was given, signed with the callback secret.
func TestOrderServiceSignsStockCallbacks(t *testing.T) {
	const secret = "test-callback-secret"
	type delivery struct {
		path, body string
		err        error
	}
	got := make(chan delivery, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = event.VerifyCallback([][]byte{[]byte(secret)}, body, r.Header.Get(event.SignatureTimestampHeader),
				r.Header.Get(event.SignatureHeader), time.Now(), time.Minute)
		}
		got <- delivery{r.URL.Path, string(body), err}
	}))
	defer ts.Close()
	cfg := service.CallbackSenderConfig{OrderURL: ts.URL + "/", Timeout: time.Second,
		Callbacks: service.CallbackConfig{Secret: secret}}

	orders := adapters.NewOrderService(cfg)
	payload := `{"callbackId":"CB-1","type":"STOCK_REJECTED","orderId":"O-1"}`
	if _, err := orders.Callbacks.Send(context.Background(), []outbox.Message{{EventID: "CB-1", AggregateID: "O-1", Payload: []byte(payload)}}); err != nil {
		t.Fatal(err)
	}
	d := <-got
	if d.path != adapters.CallbackPath || d.body != payload || d.err != nil {
		t.Fatalf("delivered to %s: %s (signature: %v), want %s: %s signed", d.path, d.body, d.err, adapters.CallbackPath, payload)
	}
}
