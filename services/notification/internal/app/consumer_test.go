package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/notification/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/notification/internal/app"
	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
)

const consumerName = "notification-service"

type fixture struct {
	db   *sqlx.DB
	repo *adapters.Repository
	fp   *failpoint.Registry
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(),
		postgres.MigrationSet{Name: "notification", FS: os.DirFS("../../migrations")})
	fp := consumertest.FailPoints(t, app.FailPoint)
	return fixture{db: db, repo: adapters.NewRepository(db), fp: fp}
}

// processor returns a processor sending through senders.
func (f fixture) processor(senders app.SenderFactory) *inbox.Processor {
	c := app.NewConsumer(senders, f.fp, slog.New(slog.DiscardHandler))
	return inbox.NewProcessor(f.db, consumerName, versionguard.NewBatch(consumerName, c.Transitions(), c.Apply).WithLateFacts(c.LateFacts()))
}

func (f fixture) dbProcessor() *inbox.Processor {
	return f.processor(app.DBSink(f.repo, slog.New(slog.DiscardHandler)))
}

// sent lists an order's notifications as their kinds, in order.
func (f fixture) sent(t *testing.T, orderID string) []string {
	t.Helper()
	ns, err := f.repo.List(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = string(n.Kind)
	}
	return out
}

func (f fixture) state(t *testing.T, orderID string) string {
	t.Helper()
	s, _, err := versionguard.State(context.Background(), f.db, consumerName, orderID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestApply(t *testing.T) {
	type step struct {
		typ     event.Type
		version int64
	}
	tests := []struct {
		name      string
		steps     []step
		repeat    bool // deliver every event twice
		wantState string
		want      []string
	}{
		{
			name: "the same OrderPaid twice notifies once", steps: []step{{event.OrderPaid, 3}}, repeat: true,
			wantState: "PAID_NOTIFIED", want: []string{"ORDER_PAID"},
		},
		{
			name:      "declined refund, then a refund",
			steps:     []step{{event.OrderPaid, 3}, {event.OrderRefundRejected, 5}, {event.OrderRefunded, 7}},
			wantState: "REFUNDED_NOTIFIED", want: []string{"ORDER_PAID", "REFUND_REJECTED", "ORDER_REFUNDED"},
		},
		{
			name:      "refund before paid is told after it",
			steps:     []step{{event.OrderRefunded, 5}, {event.OrderPaid, 3}},
			wantState: "REFUNDED_NOTIFIED", want: []string{"ORDER_PAID", "ORDER_REFUNDED"},
		},
		{
			name:      "two partial refunds and a declined one between them",
			steps:     []step{{event.OrderPaid, 3}, {event.OrderRefunded, 5}, {event.OrderRefundRejected, 7}, {event.OrderRefunded, 9}},
			wantState: "REFUNDED_NOTIFIED", want: []string{"ORDER_PAID", "ORDER_REFUNDED", "REFUND_REJECTED", "ORDER_REFUNDED"},
		},
		{
			name:      "a payment that reached a cancelled order is told once it is returned",
			steps:     []step{{event.OrderCancelled, 2}, {event.OrderPaymentRejected, 3}, {event.OrderPaymentReturned, 4}},
			wantState: "RETURN_NOTIFIED", want: []string{"PAYMENT_RETURNED"},
		},
		{
			// Refund v5 was dead-lettered and is replayed after refund v7:
			// the customer still hears of both, and the state stays.
			name:      "a refund replayed after a later one is told",
			steps:     []step{{event.OrderPaid, 3}, {event.OrderRefunded, 7}, {event.OrderRefunded, 5}},
			wantState: "REFUNDED_NOTIFIED", want: []string{"ORDER_PAID", "ORDER_REFUNDED", "ORDER_REFUNDED"},
		},
		{
			name:      "a declined refund replayed after a later refund is told",
			steps:     []step{{event.OrderPaid, 3}, {event.OrderRefunded, 7}, {event.OrderRefundRejected, 5}},
			wantState: "REFUNDED_NOTIFIED", want: []string{"ORDER_PAID", "ORDER_REFUNDED", "REFUND_REJECTED"},
		},
		{
			name:  "a late refund delivered twice is told once",
			steps: []step{{event.OrderPaid, 3}, {event.OrderRefunded, 7}, {event.OrderRefunded, 5}}, repeat: true,
			wantState: "REFUNDED_NOTIFIED", want: []string{"ORDER_PAID", "ORDER_REFUNDED", "ORDER_REFUNDED"},
		},
		{
			name:      "events the customer does not hear about",
			steps:     []step{{event.OrderCreated, 1}, {event.OrderCheckedOut, 2}, {event.OrderPaid, 3}, {event.OrderRefundRequested, 4}},
			wantState: "PAID_NOTIFIED", want: []string{"ORDER_PAID"},
		},
	}
	f := newFixture(t)
	proc := f.dbProcessor()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("O-%d", i)
			for _, st := range tt.steps {
				env := consumertest.Sample(t, st.typ, id, st.version)
				deliveries := 1
				if tt.repeat {
					deliveries = 2
				}
				for range deliveries {
					if _, err := proc.Process(context.Background(), env); err != nil {
						t.Fatalf("process %s: %v", st.typ, err)
					}
				}
			}
			if got := f.state(t, id); got != tt.wantState {
				t.Fatalf("state = %s, want %s", got, tt.wantState)
			}
			if got := f.sent(t, id); !slices.Equal(got, tt.want) {
				t.Fatalf("notifications = %v, want %v", got, tt.want)
			}
		})
	}
}

// failingSender stands for a sender whose provider is down.
type failingSender struct{}

var errProviderDown = errors.New("provider down")

func (failingSender) Send(context.Context, []notification.Notification) error { return errProviderDown }

func TestFailedSendRollsBackEverything(t *testing.T) {
	f := newFixture(t)
	env := consumertest.Sample(t, event.OrderPaid, "O-1", 3)
	failing := f.processor(func(*versionguard.UnitOfWork) app.Sender { return failingSender{} })

	if _, err := failing.Process(context.Background(), env); !errors.Is(err, errProviderDown) {
		t.Fatalf("process: %v, want the sender's error", err)
	}
	if n, err := inbox.Count(context.Background(), f.db, consumerName, env.EventID); err != nil || n != 0 {
		t.Fatalf("dedup rows = %d (%v), want 0: the event must be delivered again", n, err)
	}
	if got := f.state(t, "O-1"); got != "NONE" {
		t.Fatalf("state = %s, want NONE", got)
	}
	if _, err := f.dbProcessor().Process(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if got, want := f.sent(t, "O-1"), []string{"ORDER_PAID"}; !slices.Equal(got, want) {
		t.Fatalf("notifications = %v, want %v", got, want)
	}
}

func TestFailPointRollsBackAndRetrySucceeds(t *testing.T) {
	f := newFixture(t)
	proc := f.dbProcessor()
	if err := f.fp.Set(app.FailPoint, failpoint.ActionError, 1); err != nil {
		t.Fatal(err)
	}
	env := consumertest.Sample(t, event.OrderPaid, "O-1", 3)
	if _, err := proc.Process(context.Background(), env); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("first attempt: %v, want the injected failure", err)
	}
	if got := f.sent(t, "O-1"); len(got) != 0 {
		t.Fatalf("notifications after failure = %v, want none", got)
	}
	if _, err := proc.Process(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if got := f.sent(t, "O-1"); len(got) != 1 {
		t.Fatalf("notifications after retry = %v, want one", got)
	}
	if n := f.fp.Hits(app.FailPoint); n != 1 {
		t.Fatalf("%s fired %d times, want 1 (the retry passes it disarmed)", app.FailPoint, n)
	}
}

// TestNotificationsTellTheCustomerTheirMoney: each notification is recorded
// for the event's customer, names the event it tells, and its text carries
// the amount and currency of that event (not another's: each event has its
// own amount), through the version guard and the late-fact path alike.
func TestNotificationsTellTheCustomerTheirMoney(t *testing.T) {
	items := []event.Item{{SKU: "SKU-1", Quantity: 1}}
	type step struct {
		typ      event.Type
		version  int64
		data     any
		customer string
		body     string
	}
	orders := []struct {
		id    string
		steps []step
	}{
		{"O-paid", []step{
			{event.OrderPaid, 3, event.OrderPaidData{PaymentID: "P-1", PaidAmount: consumertest.Money("123.45"), Currency: "EUR", CustomerID: "C-77", Items: items},
				"C-77", "We received your payment of 123.45 EUR for order O-paid. We are preparing your items."},
			{event.OrderRefundRejected, 5, event.OrderRefundRejectedData{RefundID: "R-1", Amount: consumertest.Money("200.00"), Currency: "EUR", CustomerID: "C-77",
				Reason: notification.ReasonRefundExceedsPayment},
				"C-77", "Your refund request of 200.00 EUR for order O-paid was declined: it is more than what is left of your payment."},
			{event.OrderRefunded, 9, event.OrderRefundedData{RefundID: "R-3", PaymentID: "P-1", RefundedAmount: consumertest.Money("23.45"),
				TotalRefundedAmount: consumertest.Money("33.45"), Currency: "EUR", CustomerID: "C-77", Items: items, TotalReturnedItems: items},
				"C-77", "Your refund of 23.45 EUR for order O-paid is complete."},
			// Refund v7 arrives after v9: told through the late-fact path.
			{event.OrderRefunded, 7, event.OrderRefundedData{RefundID: "R-2", PaymentID: "P-1", RefundedAmount: consumertest.Money("10.00"),
				TotalRefundedAmount: consumertest.Money("10.00"), Currency: "EUR", CustomerID: "C-77", Items: items, TotalReturnedItems: items},
				"C-77", "Your refund of 10.00 EUR for order O-paid is complete."},
		}},
		{"O-returned", []step{
			{event.OrderPaymentReturned, 4, event.OrderPaymentReturnedData{PaymentID: "P-2", RefundID: "R-9", Amount: consumertest.Money("67.89"), Currency: "USD", CustomerID: "C-78"},
				"C-78", "Your payment of 67.89 USD reached order O-returned after it was cancelled; it has been returned to you in full."},
		}},
	}
	kindOf := map[event.Type]notification.Kind{event.OrderPaid: notification.KindOrderPaid, event.OrderRefunded: notification.KindOrderRefunded,
		event.OrderRefundRejected: notification.KindRefundRejected, event.OrderPaymentReturned: notification.KindPaymentReturned}
	f := newFixture(t)
	proc := f.dbProcessor()
	for _, o := range orders {
		t.Run(o.id, func(t *testing.T) {
			var eventIDs []string
			for _, st := range o.steps {
				env := consumertest.Event(t, st.typ, o.id, st.version, st.data)
				if _, err := proc.Process(context.Background(), env); err != nil {
					t.Fatalf("process %s v%d: %v", st.typ, st.version, err)
				}
				eventIDs = append(eventIDs, env.EventID)
			}
			ns, err := f.repo.List(context.Background(), o.id)
			if err != nil {
				t.Fatal(err)
			}
			if len(ns) != len(o.steps) {
				t.Fatalf("%d notifications, want %d: %+v", len(ns), len(o.steps), ns)
			}
			for i, n := range ns {
				st := o.steps[i]
				if n.OrderID != o.id || n.CustomerID != st.customer || n.EventID != eventIDs[i] || n.Kind != kindOf[st.typ] ||
					n.Channel != notification.ChannelInApp || n.Body != st.body {
					t.Errorf("notification %d of %s v%d:\n got %+v\nwant customer %s, event %s, body %q",
						i, st.typ, st.version, n.Notification, st.customer, eventIDs[i], st.body)
				}
			}
		})
	}
}

// TestAnEventWhoseDataDoesNotDecodeIsRefused: an event of each told type
// whose payload does not decode (an amount as a JSON number, a customer as
// an object) is refused with an invalid-event error, which the consumer
// dead-letters at once; nothing is recorded and the order's state stays.
// The router checks each payload against its schema first (event.Parse),
// so this is the notification service's own guard against telling a
// customer a message without their id, amount or currency.
func TestAnEventWhoseDataDoesNotDecodeIsRefused(t *testing.T) {
	tests := []struct {
		typ   event.Type
		state string // the state the order must be in for the event to apply
		data  string
	}{
		{event.OrderPaid, "", `{"paymentId":"P-1","paidAmount":80,"currency":"CNY","customerId":"C-1","items":[]}`},
		{event.OrderRefunded, "paid", `{"refundId":"R-1","paymentId":"P-1","refundedAmount":"80.00","totalRefundedAmount":"80.00","currency":"CNY","customerId":{"id":"C-1"},"items":[],"totalReturnedItems":[]}`},
		{event.OrderRefundRejected, "paid", `{"refundId":"R-1","amount":500,"currency":"CNY","customerId":"C-1","reason":"REFUND_EXCEEDS_PAYMENT"}`},
		{event.OrderPaymentReturned, "", `{"paymentId":"P-1","refundId":"R-9","amount":"80.00","currency":["CNY"],"customerId":"C-1"}`},
		{event.OrderPaid, "", `"not an object"`},
	}
	f := newFixture(t)
	proc := f.dbProcessor()
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%s %d", tt.typ, i), func(t *testing.T) {
			id := fmt.Sprintf("O-bad-%d", i)
			want := []string{}
			if tt.state == "paid" {
				if _, err := proc.Process(context.Background(), consumertest.Sample(t, event.OrderPaid, id, 3)); err != nil {
					t.Fatal(err)
				}
				want = []string{"ORDER_PAID"}
			}
			before := f.state(t, id)
			env := consumertest.Sample(t, tt.typ, id, 5)
			env.Data = []byte(tt.data)
			_, err := proc.Process(context.Background(), env)
			var invalid *event.InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("process: %v, want an invalid-event error", err)
			}
			if class, _ := consumer.Classify(err); class != consumer.Permanent {
				t.Fatalf("process: %v classed %s, want %s (dead-lettered at once)", err, class, consumer.Permanent)
			}
			if got := f.sent(t, id); !slices.Equal(got, want) {
				t.Fatalf("notifications = %v, want %v", got, want)
			}
			if got := f.state(t, id); got != before {
				t.Fatalf("state = %s, want %s as before the event", got, before)
			}
			if n, err := inbox.Count(context.Background(), f.db, consumerName, env.EventID); err != nil || n != 0 {
				t.Fatalf("dedup rows = %d (%v), want 0", n, err)
			}
		})
	}
}

// failingRecorder stands for a notifications table that cannot be written.
type failingRecorder struct{}

var errTableDown = errors.New("notifications table unwritable")

func (failingRecorder) Record(context.Context, *versionguard.UnitOfWork, []notification.Notification) error {
	return errTableDown
}

// TestAFailedRecordIsNotAcknowledged: when the notification cannot be
// recorded, the default sender says so, and the event is neither applied
// nor marked processed: it is delivered again.
func TestAFailedRecordIsNotAcknowledged(t *testing.T) {
	f := newFixture(t)
	env := consumertest.Sample(t, event.OrderPaid, "O-1", 3)
	proc := f.processor(app.DBSink(failingRecorder{}, slog.New(slog.DiscardHandler)))
	if _, err := proc.Process(context.Background(), env); !errors.Is(err, errTableDown) {
		t.Fatalf("process: %v, want the recorder's error", err)
	}
	if n, err := inbox.Count(context.Background(), f.db, consumerName, env.EventID); err != nil || n != 0 {
		t.Fatalf("dedup rows = %d (%v), want 0: the event must be delivered again", n, err)
	}
	if got := f.state(t, "O-1"); got != "NONE" {
		t.Fatalf("state = %s, want NONE", got)
	}
}
