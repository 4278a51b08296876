package adapters_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

const secret = "test-callback-secret"

// orderService records the callbacks it acknowledged; it answers 503
// OVERLOADED with Retry-After, as a shed request, until it is up, and 401
// to a bad signature.
type orderService struct {
	mu        sync.Mutex
	up        bool
	refused   int
	badSigned int
	delivered []event.Callback
}

func (o *orderService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.URL.Path != adapters.CallbackPath {
		http.NotFound(w, r)
		return
	}
	if event.VerifyCallback([][]byte{[]byte(secret)}, body, r.Header.Get(event.SignatureTimestampHeader),
		r.Header.Get(event.SignatureHeader), time.Now(), time.Minute) != nil {
		o.badSigned++
		http.Error(w, `{"businessCode":"INVALID_SIGNATURE"}`, http.StatusUnauthorized)
		return
	}
	if !o.up {
		o.refused++
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"businessCode":"OVERLOADED","message":"at capacity"}`, http.StatusServiceUnavailable)
		return
	}
	var cb event.Callback
	if err := json.Unmarshal(body, &cb); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.delivered = append(o.delivered, cb)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"businessCode":"SUCCESS","status":"PAID","version":3}`))
}

func (o *orderService) snapshot() (refused, badSigned int, delivered []event.Callback) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused, o.badSigned, append([]event.Callback(nil), o.delivered...)
}

func (o *orderService) start() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.up = true
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		<-tick.C
	}
}

func TestRelayDeliversSignedCallbackUntilAcknowledged(t *testing.T) {
	db := newDB(t)
	repo := adapters.NewRepository(db, nil)
	p, _, err := repo.Create(context.Background(), payment.New(request(t, "O-1", "80.00")), 2)
	if err != nil {
		t.Fatal(err)
	}
	var callbackID string
	if err := db.Get(&callbackID, `SELECT event_id FROM outbox_events WHERE aggregate_id = 'O-1'`); err != nil {
		t.Fatal(err)
	}

	order := &orderService{}
	ts := httptest.NewServer(order)
	defer ts.Close()
	cfg := outbox.DefaultRelayConfig()
	cfg.PollInterval, cfg.BackoffInitial, cfg.BackoffMax = 5*time.Millisecond, 10*time.Millisecond, 20*time.Millisecond
	relay, err := outbox.NewRelay(db, outbox.NewHTTPSink(ts.Client(), ts.URL+adapters.CallbackPath, []byte(secret)), cfg,
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- relay.Run(ctx) }()

	status := func() outbox.Status {
		s, err := outbox.Lookup(context.Background(), db, callbackID)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The order service is down: the row stays pending, its attempts grow
	// and its next attempt moves back.
	waitUntil(t, 10*time.Second, "the row failed once", func() bool { return status().Attempts >= 1 })
	first := status()
	waitUntil(t, 10*time.Second, "the row failed again", func() bool { return status().Attempts >= first.Attempts+2 })
	failing := status()
	if failing.Status != outbox.StatusPending || failing.LastError == nil || !failing.NextAttemptAt.After(first.NextAttemptAt) {
		t.Fatalf("while the order service is down: %+v (first failure %+v)", failing, first)
	}
	if _, _, delivered := order.snapshot(); len(delivered) != 0 {
		t.Fatalf("%d callbacks acknowledged while refusing", len(delivered))
	}

	order.start()
	waitUntil(t, 10*time.Second, "the row is sent", func() bool { return status().Status == outbox.StatusSent })
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("relay.Run = %v", err)
	}
	// Nothing is left to deliver: a further poll sends nothing again.
	if n, err := relay.RunOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("RunOnce after delivery = %d, %v", n, err)
	}

	refused, badSigned, delivered := order.snapshot()
	sent := status()
	if badSigned != 0 {
		t.Fatalf("%d callbacks with a bad signature", badSigned)
	}
	if sent.Attempts != refused+1 || sent.SentAt == nil {
		t.Fatalf("sent row %+v after %d refusals", sent, refused)
	}
	want := event.Callback{CallbackID: callbackID, Type: rules.CallbackPaymentSucceeded, OrderID: "O-1", PaymentID: p.ID,
		Amount: delivered[0].Amount, Currency: "CNY"}
	if len(delivered) != 1 || delivered[0] != want || (delivered[0].Amount == nil || *delivered[0].Amount != "80.00") {
		t.Fatalf("delivered %+v, want once %+v", delivered, want)
	}
}
