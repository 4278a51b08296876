package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/payment/internal/app"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

const consumerName = "payment-service"

type fixture struct {
	db        *sqlx.DB
	repo      *adapters.Repository
	fp        *failpoint.Registry
	proc      *inbox.Processor
	paymentID string
}

// setup returns a payments database holding the payment of O-1 (80.00 CNY)
// and a processor for the refund consumer.
func setup(t *testing.T) *fixture {
	t.Helper()
	db := consumertest.Database(t, outbox.Schema(), postgres.MigrationSet{Name: "payment", FS: os.DirFS("../../migrations")})
	repo := adapters.NewRepository(db, nil)
	req, err := payment.NewRequest("O-1", "80.00", "CNY")
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := repo.Create(context.Background(), payment.New(req), 2)
	if err != nil {
		t.Fatal(err)
	}
	fp := consumertest.FailPoints(t, app.FailPoint)
	c := app.NewConsumer(app.NewRefunds(repo), fp, slog.New(slog.DiscardHandler))
	proc := inbox.NewProcessor(db, consumerName, versionguard.New(consumerName, c.Transitions(), c.Apply))
	return &fixture{db: db, repo: repo, fp: fp, proc: proc, paymentID: p.ID}
}

type refundRow struct {
	RefundID  string  `db:"refund_id"`
	PaymentID *string `db:"payment_id"`
	Amount    string  `db:"amount"`
	Status    string  `db:"status"`
	Reason    *string `db:"reason"`
}

func (f *fixture) refunds(t *testing.T, orderID string) []refundRow {
	t.Helper()
	var rows []refundRow
	if err := f.db.Select(&rows, `SELECT refund_id, payment_id, amount::text AS amount, status, reason
		FROM refunds WHERE order_id = $1 ORDER BY created_at`, orderID); err != nil {
		t.Fatal(err)
	}
	return rows
}

// callbacks returns the order's callbacks of type typ.
func (f *fixture) callbacks(t *testing.T, orderID string, typ rules.CallbackType) []event.Callback {
	t.Helper()
	var payloads [][]byte
	if err := f.db.Select(&payloads, `SELECT payload FROM outbox_events WHERE aggregate_id = $1 AND event_type = $2 ORDER BY id`,
		orderID, string(typ)); err != nil {
		t.Fatal(err)
	}
	out := make([]event.Callback, len(payloads))
	for i, p := range payloads {
		if err := json.Unmarshal(p, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func (f *fixture) payment(t *testing.T, orderID string) payment.Payment {
	t.Helper()
	p, err := f.repo.ByOrder(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFullRefund(t *testing.T) {
	f := setup(t)
	consumertest.Process(t, f.proc, consumertest.OrderRefundRequested(t, "O-1", 4, "R-1", f.paymentID, "80.00"), versionguard.Applied)

	rows := f.refunds(t, "O-1")
	if len(rows) != 1 || rows[0].RefundID != "R-1" || rows[0].Status != payment.RefundSucceeded ||
		rows[0].PaymentID == nil || *rows[0].PaymentID != f.paymentID || !decimal.RequireFromString(rows[0].Amount).Equal(decimal.NewFromInt(80)) || rows[0].Reason != nil {
		t.Fatalf("refund rows %+v", rows)
	}
	p := f.payment(t, "O-1")
	if p.Status != payment.StatusRefunded || p.Refunded.String() != "80" {
		t.Fatalf("payment after full refund: %s refunded %s", p.Status, p.Refunded)
	}
	cbs := f.callbacks(t, "O-1", rules.CallbackRefundSucceeded)
	if len(cbs) != 1 || cbs[0].RefundID != "R-1" || cbs[0].PaymentID != f.paymentID || (cbs[0].Amount == nil || *cbs[0].Amount != "80.00") ||
		cbs[0].Currency != "CNY" || cbs[0].Reason != "" || cbs[0].CallbackID == "" {
		t.Fatalf("REFUND_SUCCEEDED callbacks %+v", cbs)
	}
	if n := len(f.callbacks(t, "O-1", rules.CallbackRefundRejected)); n != 0 {
		t.Fatalf("%d REFUND_REJECTED callbacks", n)
	}
	state, version, err := versionguard.State(context.Background(), f.db, consumerName, "O-1")
	if err != nil || state != app.StateRefundHandled || version != 4 {
		t.Fatalf("guard state %s v%d (%v)", state, version, err)
	}
}

func TestRefundAbovePaymentIsRejected(t *testing.T) {
	f := setup(t)
	consumertest.Process(t, f.proc, consumertest.OrderRefundRequested(t, "O-1", 4, "R-1", f.paymentID, "80.01"), versionguard.Applied)

	rows := f.refunds(t, "O-1")
	if len(rows) != 1 || rows[0].Status != payment.RefundRejected || rows[0].Reason == nil ||
		*rows[0].Reason != payment.ReasonRefundExceedsPayment {
		t.Fatalf("refund rows %+v", rows)
	}
	p := f.payment(t, "O-1")
	if p.Status != payment.StatusSucceeded || !p.Refunded.IsZero() {
		t.Fatalf("payment after rejected refund: %s refunded %s", p.Status, p.Refunded)
	}
	cbs := f.callbacks(t, "O-1", rules.CallbackRefundRejected)
	if len(cbs) != 1 || cbs[0].Reason != payment.ReasonRefundExceedsPayment || cbs[0].RefundID != "R-1" ||
		(cbs[0].Amount == nil || *cbs[0].Amount != "80.01") || cbs[0].PaymentID != f.paymentID {
		t.Fatalf("REFUND_REJECTED callbacks %+v", cbs)
	}
	if n := len(f.callbacks(t, "O-1", rules.CallbackRefundSucceeded)); n != 0 {
		t.Fatalf("%d REFUND_SUCCEEDED callbacks", n)
	}
}

func TestRefundWithoutPaymentIsRejected(t *testing.T) {
	f := setup(t)
	consumertest.Process(t, f.proc, consumertest.OrderRefundRequested(t, "O-2", 4, "R-2", "P-elsewhere", "10.00"), versionguard.Applied)

	rows := f.refunds(t, "O-2")
	if len(rows) != 1 || rows[0].Status != payment.RefundRejected || rows[0].PaymentID != nil ||
		rows[0].Reason == nil || *rows[0].Reason != payment.ReasonNoPayment {
		t.Fatalf("refund rows %+v", rows)
	}
	cbs := f.callbacks(t, "O-2", rules.CallbackRefundRejected)
	if len(cbs) != 1 || cbs[0].Reason != payment.ReasonNoPayment || cbs[0].PaymentID != "P-elsewhere" {
		t.Fatalf("REFUND_REJECTED callbacks %+v", cbs)
	}
}

func TestSameRefundEventTwice(t *testing.T) {
	f := setup(t)
	env := consumertest.OrderRefundRequested(t, "O-1", 4, "R-1", f.paymentID, "30.00")
	consumertest.Process(t, f.proc, env, versionguard.Applied)
	consumertest.Process(t, f.proc, env, inbox.Duplicate)

	if rows := f.refunds(t, "O-1"); len(rows) != 1 {
		t.Fatalf("%d refund rows, want 1", len(rows))
	}
	if n := len(f.callbacks(t, "O-1", rules.CallbackRefundSucceeded)); n != 1 {
		t.Fatalf("%d REFUND_SUCCEEDED callbacks, want 1", n)
	}
	p := f.payment(t, "O-1")
	if p.Status != payment.StatusPartiallyRefunded || p.Refunded.String() != "30" {
		t.Fatalf("payment after one partial refund: %s refunded %s", p.Status, p.Refunded)
	}
}

func TestSameRefundIDInANewEventIsNotExecutedAgain(t *testing.T) {
	f := setup(t)
	consumertest.Process(t, f.proc, consumertest.OrderRefundRequested(t, "O-1", 4, "R-1", f.paymentID, "30.00"), versionguard.Applied)
	consumertest.Process(t, f.proc, consumertest.OrderRefundRequested(t, "O-1", 6, "R-1", f.paymentID, "30.00"), versionguard.Applied)

	if rows := f.refunds(t, "O-1"); len(rows) != 1 {
		t.Fatalf("%d refund rows, want 1", len(rows))
	}
	if p := f.payment(t, "O-1"); p.Refunded.String() != "30" {
		t.Fatalf("refunded %s, want 30", p.Refunded)
	}
}

func TestSecondRefundAfterRejection(t *testing.T) {
	f := setup(t)
	// v4 asks too much and is rejected; the order goes back to PAID (v5,
	// not the payment service's business) and asks again (v6).
	consumertest.Process(t, f.proc, consumertest.OrderRefundRequested(t, "O-1", 4, "R-1", f.paymentID, "100.00"), versionguard.Applied)
	consumertest.Process(t, f.proc, consumertest.OrderRefundRequested(t, "O-1", 6, "R-2", f.paymentID, "80.00"), versionguard.Applied)
	// A late redelivery of an older request under a new event id is stale.
	consumertest.Process(t, f.proc, consumertest.OrderRefundRequested(t, "O-1", 4, "R-3", f.paymentID, "1.00"), versionguard.IgnoredStale)

	rows := f.refunds(t, "O-1")
	if len(rows) != 2 || rows[0].Status != payment.RefundRejected || rows[1].Status != payment.RefundSucceeded {
		t.Fatalf("refund rows %+v", rows)
	}
	if p := f.payment(t, "O-1"); p.Status != payment.StatusRefunded {
		t.Fatalf("payment status %s, want REFUNDED", p.Status)
	}
}

func TestFailPointFailsApplyWithoutSideEffects(t *testing.T) {
	f := setup(t)
	if err := f.fp.Set(app.FailPoint, failpoint.ActionError, 1); err != nil {
		t.Fatal(err)
	}
	env := consumertest.OrderRefundRequested(t, "O-1", 4, "R-1", f.paymentID, "80.00")
	if _, err := f.proc.Process(context.Background(), env); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("Process with the fail point armed = %v, want ErrInjected", err)
	}
	if rows := f.refunds(t, "O-1"); len(rows) != 0 {
		t.Fatalf("%d refund rows after a failed apply", len(rows))
	}
	if n, err := inbox.Count(context.Background(), f.db, consumerName, env.EventID); err != nil || n != 0 {
		t.Fatalf("dedup rows after a failed apply: %d (%v)", n, err)
	}
	consumertest.Process(t, f.proc, env, versionguard.Applied)
	if rows := f.refunds(t, "O-1"); len(rows) != 1 {
		t.Fatalf("%d refund rows after the retry, want 1", len(rows))
	}
	if n := f.fp.Hits(app.FailPoint); n != 1 {
		t.Fatalf("%s fired %d times, want 1 (the retry passes it disarmed)", app.FailPoint, n)
	}
}

func TestOtherEventsAreNotHandled(t *testing.T) {
	f := setup(t)
	env := consumertest.Sample(t, event.OrderCancelled, "O-1", 3)
	consumertest.Process(t, f.proc, env, inbox.NotHandled)
	if n, err := inbox.Count(context.Background(), f.db, consumerName, env.EventID); err != nil || n != 0 {
		t.Fatalf("dedup rows for an unhandled event: %d (%v)", n, err)
	}
}

// TestRejectedPaymentIsReturnedInFull: the order was cancelled before the
// payment reached it (OrderPaymentRejected after OrderCancelled); the
// refund path returns the whole payment and tells the order.
func TestRejectedPaymentIsReturnedInFull(t *testing.T) {
	f := setup(t)
	env := consumertest.OrderPaymentRejected(t, "O-1", 4, f.paymentID, "R-return", "80.00")
	consumertest.Process(t, f.proc, env, versionguard.Applied)
	consumertest.Process(t, f.proc, env, inbox.Duplicate)

	rows := f.refunds(t, "O-1")
	if len(rows) != 1 || rows[0].RefundID != "R-return" || rows[0].Status != payment.RefundSucceeded {
		t.Fatalf("refund rows %+v", rows)
	}
	if p := f.payment(t, "O-1"); p.Status != payment.StatusRefunded || !p.Refunded.Equal(decimal.NewFromInt(80)) {
		t.Fatalf("payment %s refunded %s, want REFUNDED 80", p.Status, p.Refunded)
	}
	cbs := f.callbacks(t, "O-1", rules.CallbackRefundSucceeded)
	if len(cbs) != 1 || cbs[0].RefundID != "R-return" || (cbs[0].Amount == nil || *cbs[0].Amount != "80.00") {
		t.Fatalf("REFUND_SUCCEEDED callbacks %+v", cbs)
	}
}

// TestPartialRefundsDrawDownThePayment: three refunds of one order, each a
// new request after the last succeeded, until nothing is left.
func TestPartialRefundsDrawDownThePayment(t *testing.T) {
	f := setup(t)
	for i, step := range []struct {
		amount, refunded string
		status           payment.Status
	}{
		{"40.00", "40", payment.StatusPartiallyRefunded},
		{"0.01", "40.01", payment.StatusPartiallyRefunded},
		{"39.99", "80", payment.StatusRefunded},
	} {
		consumertest.Process(t, f.proc, consumertest.OrderRefundRequested(t, "O-1", int64(4+2*i), fmt.Sprintf("R-%d", i), f.paymentID, step.amount), versionguard.Applied)
		if p := f.payment(t, "O-1"); p.Status != step.status || !p.Refunded.Equal(decimal.RequireFromString(step.refunded)) {
			t.Fatalf("step %d: payment %s refunded %s, want %s %s", i, p.Status, p.Refunded, step.status, step.refunded)
		}
	}
	if n := len(f.callbacks(t, "O-1", rules.CallbackRefundSucceeded)); n != 3 {
		t.Fatalf("%d REFUND_SUCCEEDED callbacks, want 3", n)
	}
}
