package app_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
)

// fakeSuite answers as a suite whose services kept spans, outbox rows,
// dedup records, dead letters and findings; a service in down answers
// nothing.
type fakeSuite struct {
	order    *suiteapi.OrderView
	rows     map[string][]outbox.Status
	spans    map[string][]tracing.Span // by service
	dedup    map[string]suiteapi.Dedup // by "service eventId"
	dead     map[string][]suiteapi.DeadLetter
	findings []suiteapi.Finding
	down     map[string]bool
}

var errDown = errors.New("connection refused")

func (f *fakeSuite) check(service string) error {
	if f.down[service] {
		return errDown
	}
	return nil
}

func (f *fakeSuite) Order(_ context.Context, _ string) (suiteapi.OrderView, error) {
	if err := f.check(suiteapi.Order); err != nil {
		return suiteapi.OrderView{}, err
	}
	if f.order == nil {
		return suiteapi.OrderView{}, &suiteapi.StatusError{Status: http.StatusNotFound, BusinessCode: "ORDER_NOT_FOUND"}
	}
	return *f.order, nil
}

func (f *fakeSuite) Outbox(_ context.Context, svc, _ string) (suiteapi.OutboxBacklog, error) {
	return suiteapi.OutboxBacklog{Events: f.rows[svc]}, f.check(svc)
}

func (f *fakeSuite) Traces(_ context.Context, svc, traceID string) ([]suiteapi.Span, error) {
	if err := f.check(svc); err != nil {
		return nil, err
	}
	var out []suiteapi.Span
	for _, s := range f.spans[svc] {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeSuite) RecentSpans(_ context.Context, svc string, _ int) ([]suiteapi.Span, error) {
	return f.spans[svc], f.check(svc)
}

func (f *fakeSuite) Dedup(_ context.Context, svc, eventID string) (suiteapi.Dedup, error) {
	return f.dedup[svc+" "+eventID], f.check(svc)
}

func (f *fakeSuite) DeadLetters(_ context.Context, svc, _, _ string) ([]suiteapi.DeadLetter, error) {
	return f.dead[svc], f.check(svc)
}

func (f *fakeSuite) Findings(context.Context, string) ([]suiteapi.Finding, error) {
	return f.findings, f.check(suiteapi.Reconciliation)
}

func (f *fakeSuite) Converged(context.Context, string) (suiteapi.Convergence, error) {
	return suiteapi.Convergence{Converged: len(f.findings) == 0}, f.check(suiteapi.Reconciliation)
}

var t0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

const (
	payTrace    = "4bf92f3577b34da6a3ce929d0e0e4736"
	createTrace = "0af7651916cd43dd8448eb211c80319c"
	batchTrace  = "5b8efff798038103d269b633813fc60c"
)

// span is a span of service at t0+ms lasting 1 ms.
func span(id, parent, trace, name, kind string, ms int, attrs map[string]string) tracing.Span {
	start := t0.Add(time.Duration(ms) * time.Millisecond)
	return tracing.Span{TraceID: trace, SpanID: id, ParentSpanID: parent, Name: name, Kind: kind, Start: start,
		End: start.Add(time.Millisecond), DurationMs: 1, Status: "Unset", Attributes: attrs}
}

func ev(id, typ string) map[string]string {
	return map[string]string{"event.id": id, "event.type": typ}
}

// paidSuite is a suite after a payment: the payment's trace through every
// service, inventory's apply in a batch of another trace.
func paidSuite() *fakeSuite {
	sent := t0.Add(6 * time.Millisecond)
	inventoryApply := span("i2", "x1", batchTrace, "inbox apply", "internal", 12, nil)
	inventoryApply.Links = []tracing.Link{{TraceID: payTrace, SpanID: "i1"}}
	return &fakeSuite{
		order: &suiteapi.OrderView{OrderID: "O-1", Status: "PAID", Version: 3},
		rows: map[string][]outbox.Status{
			suiteapi.Order: {
				{EventID: "E-created", EventType: "OrderCreated", Status: "SENT", CreatedAt: t0.Add(-time.Second), SentAt: &sent, TraceID: createTrace},
				{EventID: "E-paid", EventType: "OrderPaid", Status: "SENT", CreatedAt: t0.Add(4 * time.Millisecond), SentAt: &sent, TraceID: payTrace},
			},
			suiteapi.Payment: {{EventID: "CB-1", EventType: "PAYMENT_SUCCEEDED", Status: "SENT", CreatedAt: t0.Add(time.Millisecond), TraceID: payTrace}},
		},
		spans: map[string][]tracing.Span{
			suiteapi.Payment: {
				span("p1", "", payTrace, "POST /payments", "server", 0, nil),
				span("p2", "p1", payTrace, "outbox write", "internal", 1, ev("CB-1", "PAYMENT_SUCCEEDED")),
				span("p3", "p2", payTrace, "outbox send order-callbacks", "producer", 2, ev("CB-1", "PAYMENT_SUCCEEDED")),
				span("p4", "o6", payTrace, "consume order-events", "consumer", 8, ev("E-paid", "OrderPaid")),
				span("p9", "", payTrace, "GET /payments/orders/:orderId", "server", 9, nil),
			},
			suiteapi.Order: {
				span("o3", "p3", payTrace, "POST /payments/callback", "server", 3, nil),
				span("o4", "o3", payTrace, "outbox write", "internal", 4, ev("E-paid", "OrderPaid")),
				span("o6", "o4", payTrace, "outbox send order-events", "producer", 6, ev("E-paid", "OrderPaid")),
			},
			suiteapi.Inventory: {
				span("i1", "o6", payTrace, "consume order-events", "consumer", 7, ev("E-paid", "OrderPaid")),
				inventoryApply,
			},
			suiteapi.Notification: {
				span("n1", "o6", payTrace, "consume order-events", "consumer", 10, ev("E-paid", "OrderPaid")),
				{TraceID: payTrace, SpanID: "n2", ParentSpanID: "n1", Name: "inbox apply", Kind: "internal", Start: t0.Add(11 * time.Millisecond),
					End: t0.Add(12 * time.Millisecond), Status: "Unset", Links: []tracing.Link{{TraceID: payTrace, SpanID: "n1"}},
					Attributes: map[string]string{"inbox.event_ids": `["E-other","E-paid"]`, "inbox.outcomes": `["APPLIED","DUPLICATE"]`}},
			},
			suiteapi.Points: {
				span("t1", "o6", payTrace, "consume order-events", "consumer", 8, ev("E-paid", "OrderPaid")),
				{TraceID: payTrace, SpanID: "t2", ParentSpanID: "t1", Name: "inbox apply", Kind: "internal", Start: t0.Add(9 * time.Millisecond),
					End: t0.Add(10 * time.Millisecond), Status: "Error", StatusText: "points.apply: injected", Links: []tracing.Link{{TraceID: payTrace, SpanID: "t1"}}},
			},
		},
		dedup: map[string]suiteapi.Dedup{
			"inventory E-paid": {Count: 1}, "points E-paid": {Count: 1, Duplicates: 2}, "notification E-paid": {Count: 1, Duplicates: 1},
		},
		dead: map[string][]suiteapi.DeadLetter{suiteapi.Notification: {{ID: 7, EventID: "E-paid", EventType: "OrderPaid",
			ErrorClass: "PERMANENT", Status: "DEAD", FailureReason: "bad template", DeadLetteredAt: t0.Add(20 * time.Millisecond)}}},
		findings: []suiteapi.Finding{{RunID: 3, OrderID: "O-1", Kind: "MISSING_EFFECT", Service: "notification", Expected: "1",
			Actual: "0", Action: "REPLAY_DLQ", Outcome: "APPLIED", DetectedAt: t0.Add(time.Minute)}},
	}
}

// step names an entry: "service step eventType source".
func step(e app.Entry) string {
	parts := []string{e.Service, e.Step, e.EventType, e.Source}
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), " ")
}

func TestTimelineOfAPaidOrder(t *testing.T) {
	tl, err := app.NewTimelines(app.TimelineConfig{}, paidSuite()).Build(context.Background(), "O-1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range tl.Entries {
		got = append(got, step(e))
	}
	want := []string{
		"order outbox committed OrderCreated outbox", // its span is gone: from the row
		"payment request accepted trace",
		"payment outbox committed PAYMENT_SUCCEEDED trace",
		"payment callback sent PAYMENT_SUCCEEDED trace",
		"order callback received trace",
		"order outbox committed OrderPaid trace",
		"order sent OrderCreated outbox",
		"order sent OrderPaid trace",
		"inventory received OrderPaid trace",
		"payment received OrderPaid trace",
		"points received OrderPaid trace",
		"points apply failed OrderPaid trace",
		"notification received OrderPaid trace",
		"notification duplicate ignored OrderPaid trace",
		"inventory applied OrderPaid trace", // found by its link, in another trace
		"notification dead-lettered OrderPaid dlq",
		"reconciliation reconciliation finding reconciliation",
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range tl.Entries {
		switch {
		case e.Service == "points" && e.Step == app.StepApplyFailed && e.Error != "points.apply: injected":
			t.Errorf("the failed apply's error is %q", e.Error)
		case e.Service == "notification" && e.Step == app.StepDuplicate && e.Outcome != "DUPLICATE":
			t.Errorf("the duplicate's outcome is %q", e.Outcome)
		case e.Service == "inventory" && e.Step == app.StepApplied && !strings.Contains(e.Detail, batchTrace):
			t.Errorf("the linked apply says %q, want its trace named", e.Detail)
		case e.Step == app.StepRequest && e.Clock != app.ClockRequest, e.Step == app.StepSent && e.Clock != app.ClockOutbox,
			e.Step == app.StepApplied && e.Clock != app.ClockConsumer:
			t.Errorf("%s on clock %q", step(e), e.Clock)
		}
	}
	if len(tl.Traces) != 1 || tl.Traces[0].TraceID != payTrace {
		t.Fatalf("traces %+v, want the payment's", tl.Traces)
	}
	tr := tl.Traces[0]
	if tr.Root != "payment: POST /payments" || !slices.Equal(tr.Services, []string{"payment", "order", "inventory", "points", "notification"}) {
		t.Errorf("trace root %q, services %v", tr.Root, tr.Services)
	}
	depth := map[string]int{}
	for _, s := range tr.Spans {
		depth[s.SpanID] = s.Depth
	}
	// p1 → p2 → p3 → o3 → o4 → o6 → i1 → (linked) i2
	if depth["p1"] != 0 || depth["o6"] != 5 || depth["i1"] != 6 || depth["i2"] != 7 {
		t.Errorf("depths %v", depth)
	}
	var paid app.Event
	for _, e := range tl.Events {
		if e.EventID == "E-paid" {
			paid = e
		}
	}
	wantDedup := map[string]string{"inventory": "processed once", "points": "processed once, 2 duplicates ignored",
		"notification": "processed once, 1 duplicate ignored", "payment": "not processed"}
	for svc, w := range wantDedup {
		if paid.Dedup[svc].Outcome != w {
			t.Errorf("%s dedup of OrderPaid: %q, want %q", svc, paid.Dedup[svc].Outcome, w)
		}
	}
	if len(tl.Events) != 3 || tl.Converged == nil || *tl.Converged || len(tl.Unread) != 0 {
		t.Errorf("events %d, converged %v, unread %v", len(tl.Events), tl.Converged, tl.Unread)
	}
}

func TestTimelineReadsWhatAnswers(t *testing.T) {
	tests := []struct {
		name       string
		down       []string
		wantErr    error
		wantUnread []string // "service what" prefixes
	}{
		{"every service answers", nil, nil, nil},
		{"the order service is down", []string{suiteapi.Order}, nil, []string{"order outbox rows", "order spans of trace", "order the order"}},
		{"a consumer is down", []string{suiteapi.Points}, nil, []string{"points dead letters", "points dedup record of", "points spans of trace"}},
		{"reconciliation is down", []string{suiteapi.Reconciliation}, nil, []string{"reconciliation convergence", "reconciliation findings", "reconciliation spans of trace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := paidSuite()
			f.down = map[string]bool{}
			for _, d := range tt.down {
				f.down[d] = true
			}
			tl, err := app.NewTimelines(app.TimelineConfig{}, f).Build(context.Background(), "O-1")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			for _, w := range tt.wantUnread {
				found := false
				for _, u := range tl.Unread {
					found = found || strings.HasPrefix(u.Service+" "+u.What, w) && u.Error == errDown.Error()
				}
				if !found {
					t.Errorf("unread %+v: nothing for %q", tl.Unread, w)
				}
			}
			for _, u := range tl.Unread {
				if !slices.Contains(tt.down, u.Service) {
					t.Errorf("unread %+v of a service that answers", u)
				}
			}
		})
	}
}

func TestTimelineOfAnUnknownOrder(t *testing.T) {
	f := paidSuite()
	f.order = nil
	if _, err := app.NewTimelines(app.TimelineConfig{}, f).Build(context.Background(), "O-9"); !errors.Is(err, app.ErrOrderNotFound) {
		t.Fatalf("err %v, want ErrOrderNotFound", err)
	}
}
