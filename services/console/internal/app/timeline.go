// Package app builds what the console shows from what the services
// answer: an order's timeline across every service (Timelines), the
// consumers' lag over time (Monitor) and the drill runs (Drills). It reads
// the suite through the one client of its API, scripts/suiteapi, behind
// the small interfaces declared here.
package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// Suite is what a timeline reads of the suite; *suiteapi.Client is one.
type Suite interface {
	Order(ctx context.Context, orderID string) (suiteapi.OrderView, error)
	Outbox(ctx context.Context, service, aggregateID string) (suiteapi.OutboxBacklog, error)
	Traces(ctx context.Context, service, traceID string) ([]suiteapi.Span, error)
	RecentSpans(ctx context.Context, service string, limit int) ([]suiteapi.Span, error)
	Dedup(ctx context.Context, service, eventID string) (suiteapi.Dedup, error)
	DeadLetters(ctx context.Context, service, aggregateID, status string) ([]suiteapi.DeadLetter, error)
	Findings(ctx context.Context, orderID string) ([]suiteapi.Finding, error)
	Converged(ctx context.Context, orderID string) (suiteapi.Convergence, error)
}

// The services as the timeline names them, by the short names of
// suiteapi.
var (
	// Services are the six, in the order a payment's journey reaches
	// them.
	Services = []string{suiteapi.Order, suiteapi.Payment, suiteapi.Inventory, suiteapi.Points, suiteapi.Notification, suiteapi.Reconciliation}
	// Consumers consume order-events and keep dead letters and dedup rows.
	Consumers = []string{suiteapi.Payment, suiteapi.Inventory, suiteapi.Points, suiteapi.Notification}
	// Producers have an outbox: the order's events, the payment's and the
	// inventory's callbacks to the order service.
	Producers = []string{suiteapi.Order, suiteapi.Payment, suiteapi.Inventory}
)

// The steps of a journey, the Step of an Entry.
const (
	// StepRequest is a client's command accepted by a service: the answer
	// the client got, which is not the end of the story.
	StepRequest = "request accepted"
	// StepOperator is an operator's command (/admin): a replay, a
	// republish, a refund.
	StepOperator = "operator action"
	// StepCommitted is an outbox row written in the transaction of the
	// change it announces.
	StepCommitted = "outbox committed"
	// StepSent is the relay sending an event to Kafka.
	StepSent = "sent"
	// StepCallbackSent is the relay sending a callback to the order
	// service over HTTP.
	StepCallbackSent = "callback sent"
	// StepCallbackReceived is the order service taking a callback.
	StepCallbackReceived = "callback received"
	// StepReceived is a consumer handed a message.
	StepReceived = "received"
	// StepApplied is a consumer's transaction applying it: the dedup row,
	// the version guard and the effect.
	StepApplied = "applied"
	// StepDuplicate is a consumer's transaction finding the event's dedup
	// row already there: a copy recognised, no effect.
	StepDuplicate = "duplicate ignored"
	// StepStale is the version guard ignoring an event older than the
	// order's state at the consumer.
	StepStale = "stale ignored"
	// StepParked is the version guard parking an event whose predecessor
	// has not arrived.
	StepParked = "parked"
	// StepApplyFailed is a consumer's transaction that failed: it is
	// retried, or the message dead-lettered.
	StepApplyFailed = "apply failed"
	// StepDeadLettered is a message a consumer gave up on.
	StepDeadLettered = "dead-lettered"
	// StepFinding is a mismatch a reconciliation run found, and the
	// compensation it took.
	StepFinding = "reconciliation finding"
)

// stepRank orders steps that share an instant.
var stepRank = map[string]int{StepRequest: 0, StepOperator: 0, StepCommitted: 1, StepSent: 2, StepCallbackSent: 2,
	StepCallbackReceived: 3, StepReceived: 4, StepApplied: 5, StepDuplicate: 5, StepStale: 5, StepParked: 5, StepApplyFailed: 5,
	StepDeadLettered: 6, StepFinding: 7}

// Clock names one of the three clocks of an asynchronous chain: each step
// of a journey runs on one of them, and none waits for the next.
type Clock struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Says what its time means.
	Says string `json:"says"`
}

// The three clocks' ids, the Clock of an Entry.
const (
	ClockRequest  = "request"
	ClockOutbox   = "outbox"
	ClockConsumer = "consumer"
)

// Clocks are the three clocks, in the order a journey meets them.
func Clocks() []Clock {
	return []Clock{
		{ID: ClockRequest, Name: "the request clock", Says: "when the client got its answer: the change and its event are committed, nothing else has happened yet"},
		{ID: ClockOutbox, Name: "the outbox clock", Says: "when the relay sent the committed event to Kafka, or a callback to the order service: later, and again after a failure"},
		{ID: ClockConsumer, Name: "the consumer clock", Says: "when each consumer received the event and applied it: each on its own, in its own transaction"},
	}
}

// Entry is one step of an order's journey.
type Entry struct {
	// Service is the short name of the service that took the step.
	Service string `json:"service"`
	// Step is one of the Step constants.
	Step string `json:"step"`
	// At is when the step began.
	At time.Time `json:"at"`
	// Clock is the id of the clock the step runs on; empty for a
	// reconciliation finding, which checks the three afterwards.
	Clock      string  `json:"clock,omitempty"`
	DurationMs float64 `json:"durationMs"`
	TraceID    string  `json:"traceId,omitempty"`
	SpanID     string  `json:"spanId,omitempty"`
	EventID    string  `json:"eventId,omitempty"`
	EventType  string  `json:"eventType,omitempty"`
	// Detail is the span's name, or what a finding says.
	Detail string `json:"detail,omitempty"`
	// Outcome is what a consumer's transaction did with the event
	// (APPLIED, DUPLICATE, IGNORED_STALE_EVENT, WAITING_FOR_GAP, …), as its
	// span says; empty for other steps.
	Outcome string `json:"outcome,omitempty"`
	// Error is why the step failed; empty when it did not.
	Error string `json:"error,omitempty"`
	// Source says where the step was read: a span ("trace"), an outbox
	// row whose span is gone ("outbox"), a dead letter ("dlq") or a
	// finding ("reconciliation").
	Source string `json:"source"`
}

// The sources of an Entry.
const (
	SourceTrace          = "trace"
	SourceOutbox         = "outbox"
	SourceDLQ            = "dlq"
	SourceReconciliation = "reconciliation"
)

// Trace is one trace of the order: every span the services still keep of
// it, oldest first, as a waterfall draws them.
type Trace struct {
	TraceID string `json:"traceId"`
	// Root names the span that started it ("POST /payments").
	Root     string    `json:"root"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Services []string  `json:"services"`
	Spans    []Span    `json:"spans"`
}

// Span is a span of a Trace with its place in the waterfall.
type Span struct {
	suiteapi.Span
	// From is the short name of the service that kept it.
	From string `json:"from"`
	// Depth is how many of the trace's spans are above it.
	Depth int `json:"depth"`
	// Linked says the span is not in the trace: a batch's transaction
	// that applied the trace's event in another trace, found by its link.
	Linked bool `json:"linked,omitempty"`
}

// Event is an outbox row of the order, with what each consumer did with
// it.
type Event struct {
	// Producer is the short name of the service whose outbox holds it:
	// the order's events, the payment's and inventory's callbacks.
	Producer  string     `json:"producer"`
	EventID   string     `json:"eventId"`
	EventType string     `json:"eventType"`
	Status    string     `json:"status"`
	Attempts  int        `json:"attempts"`
	CreatedAt time.Time  `json:"createdAt"`
	SentAt    *time.Time `json:"sentAt,omitempty"`
	TraceID   string     `json:"traceId,omitempty"`
	// Dedup is each consumer's dedup record of an order event, by short
	// name; none for a callback.
	Dedup map[string]Dedup `json:"dedup,omitempty"`
}

// Dedup is a consumer's dedup outcome for one event.
type Dedup struct {
	// Processed says the consumer has its dedup row: it applied the
	// event, or recognised it as none of its business, once.
	Processed bool `json:"processed"`
	// Duplicates counts the copies it recognised as duplicates.
	Duplicates int `json:"duplicates"`
	// Outcome says it in words.
	Outcome string `json:"outcome"`
}

// DeadLetter is a dead letter of the order at one consumer.
type DeadLetter struct {
	Service string `json:"service"`
	suiteapi.DeadLetter
}

// Unread is a part of the timeline a service did not answer for.
type Unread struct {
	Service string `json:"service"`
	What    string `json:"what"`
	Error   string `json:"error"`
}

// Timeline is an order's journey across every service on one time axis,
// and what the services know of it.
type Timeline struct {
	OrderID string `json:"orderId"`
	// Order is the order as the order service shows it; nil when it did
	// not answer.
	Order *suiteapi.OrderView `json:"order"`
	// Converged is reconciliation's verdict now; nil when it did not
	// answer.
	Converged   *bool               `json:"converged"`
	Mismatches  []suiteapi.Mismatch `json:"mismatches"`
	Clocks      []Clock             `json:"clocks"`
	Entries     []Entry             `json:"entries"`
	Traces      []Trace             `json:"traces"`
	Events      []Event             `json:"events"`
	DeadLetters []DeadLetter        `json:"deadLetters"`
	Findings    []suiteapi.Finding  `json:"findings"`
	Unread      []Unread            `json:"unread"`
	// ReadAt is when the console put it together.
	ReadAt time.Time `json:"readAt"`
}

// ErrOrderNotFound is an order the order service does not know.
var ErrOrderNotFound = errors.New("order not found")

// TimelineConfig bounds how a timeline is read.
type TimelineConfig struct {
	// Concurrency is how many calls to the services run at once.
	Concurrency int
	// RecentSpans is how many of a consumer's newest spans are searched
	// for a batch that applied the order's event in another trace.
	RecentSpans int
	// MaxEvents bounds the events whose dedup records are read.
	MaxEvents int
}

// DefaultTimelineConfig reads 8 at a time, searches a service's default
// span store (2048) and the dedup records of 50 events.
func DefaultTimelineConfig() TimelineConfig {
	return TimelineConfig{Concurrency: 8, RecentSpans: 2048, MaxEvents: 50}
}

// Timelines builds the timelines of orders.
type Timelines struct {
	suite Suite
	cfg   TimelineConfig
	now   func() time.Time
}

// NewTimelines returns a builder reading suite.
func NewTimelines(cfg TimelineConfig, suite Suite) *Timelines {
	def := DefaultTimelineConfig()
	cfg.Concurrency = cmp.Or(cfg.Concurrency, def.Concurrency)
	cfg.RecentSpans = cmp.Or(cfg.RecentSpans, def.RecentSpans)
	cfg.MaxEvents = cmp.Or(cfg.MaxEvents, def.MaxEvents)
	return &Timelines{suite: suite, cfg: cfg, now: time.Now}
}

// reads collects what a timeline read, from many goroutines.
type reads struct {
	mu          sync.Mutex
	order       *suiteapi.OrderView
	notFound    bool
	rows        map[string][]outbox.Status
	spans       map[string]spanFrom
	deadLetters []DeadLetter
	findings    []suiteapi.Finding
	convergence *suiteapi.Convergence
	dedup       map[string]map[string]suiteapi.Dedup
	unread      []Unread
}

// spanFrom is a span and the service that kept it.
type spanFrom struct {
	suiteapi.Span
	from   string
	linked bool
}

func (r *reads) fail(service, what string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unread = append(r.unread, Unread{Service: service, What: what, Error: err.Error()})
}

func (r *reads) addSpans(from string, spans []suiteapi.Span, linked bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range spans {
		if _, ok := r.spans[s.SpanID]; !ok {
			r.spans[s.SpanID] = spanFrom{Span: s, from: from, linked: linked}
		}
	}
}

// Build reads the order's journey from every service. A service that does
// not answer leaves its part out and is named in Unread; an order the
// order service does not know is ErrOrderNotFound.
func (t *Timelines) Build(ctx context.Context, orderID string) (Timeline, error) {
	r := &reads{rows: map[string][]outbox.Status{}, spans: map[string]spanFrom{}, dedup: map[string]map[string]suiteapi.Dedup{}}
	t.readState(ctx, orderID, r)
	if r.notFound {
		return Timeline{}, fmt.Errorf("%w: %s", ErrOrderNotFound, orderID)
	}
	t.readSpans(ctx, r)
	t.readLinkedApplies(ctx, r)
	t.readDedup(ctx, r)
	return assemble(orderID, r, t.now()), nil
}

// readState reads the order, its outbox rows at every producer, its dead
// letters at every consumer, its findings and reconciliation's verdict.
func (t *Timelines) readState(ctx context.Context, orderID string, r *reads) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(t.cfg.Concurrency)
	g.Go(func() error {
		o, err := t.suite.Order(gctx, orderID)
		switch {
		case suiteapi.IsStatus(err, http.StatusNotFound):
			r.mu.Lock()
			r.notFound = true
			r.mu.Unlock()
		case err != nil:
			r.fail(suiteapi.Order, "the order", err)
		default:
			r.mu.Lock()
			r.order = &o
			r.mu.Unlock()
		}
		return nil
	})
	for _, svc := range Producers {
		g.Go(func() error {
			b, err := t.suite.Outbox(gctx, svc, orderID)
			if err != nil {
				r.fail(svc, "outbox rows", err)
				return nil
			}
			r.mu.Lock()
			r.rows[svc] = b.Events
			r.mu.Unlock()
			return nil
		})
	}
	for _, svc := range Consumers {
		g.Go(func() error {
			items, err := t.suite.DeadLetters(gctx, svc, orderID, "")
			if err != nil {
				r.fail(svc, "dead letters", err)
				return nil
			}
			r.mu.Lock()
			for _, d := range items {
				r.deadLetters = append(r.deadLetters, DeadLetter{Service: svc, DeadLetter: d})
			}
			r.mu.Unlock()
			return nil
		})
	}
	g.Go(func() error {
		fs, err := t.suite.Findings(gctx, orderID)
		if err != nil {
			r.fail(suiteapi.Reconciliation, "findings", err)
			return nil
		}
		r.mu.Lock()
		r.findings = fs
		r.mu.Unlock()
		return nil
	})
	g.Go(func() error {
		c, err := t.suite.Converged(gctx, orderID)
		if err != nil {
			r.fail(suiteapi.Reconciliation, "convergence", err)
			return nil
		}
		r.mu.Lock()
		r.convergence = &c
		r.mu.Unlock()
		return nil
	})
	_ = g.Wait() // every error is kept in r.unread
}

// traceIDs are the traces the order's outbox rows were written in, in
// the order of their first row.
func (r *reads) traceIDs() []string {
	var ids []string
	for _, svc := range Producers {
		for _, row := range r.rows[svc] {
			if row.TraceID != "" && strings.Trim(row.TraceID, "0") != "" && !slices.Contains(ids, row.TraceID) {
				ids = append(ids, row.TraceID)
			}
		}
	}
	return ids
}

// readSpans reads every service's spans of every trace of the order.
func (t *Timelines) readSpans(ctx context.Context, r *reads) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(t.cfg.Concurrency)
	for _, id := range r.traceIDs() {
		for _, svc := range Services {
			g.Go(func() error {
				spans, err := t.suite.Traces(gctx, svc, id)
				if err != nil {
					r.fail(svc, "spans of trace "+id, err)
					return nil
				}
				r.addSpans(svc, spans, false)
				return nil
			})
		}
	}
	_ = g.Wait()
}

// readLinkedApplies finds, for a consumer whose message span of the
// order has no transaction in the trace, the batch that applied it in
// another trace's transaction: among the consumer's newest spans, the
// "inbox apply" that links the message's span.
func (t *Timelines) readLinkedApplies(ctx context.Context, r *reads) {
	missing := map[string]map[string]bool{} // service → message span ids
	applied := map[string]bool{}
	for _, s := range r.spans {
		if s.Name == spanApply {
			for _, l := range s.Links {
				applied[l.SpanID] = true
			}
		}
	}
	for _, s := range r.spans {
		if strings.HasPrefix(s.Name, spanConsume) && !applied[s.SpanID] {
			if missing[s.from] == nil {
				missing[s.from] = map[string]bool{}
			}
			missing[s.from][s.SpanID] = true
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(t.cfg.Concurrency)
	for svc, ids := range missing {
		g.Go(func() error {
			spans, err := t.suite.RecentSpans(gctx, svc, t.cfg.RecentSpans)
			if err != nil {
				r.fail(svc, "recent spans", err)
				return nil
			}
			var found []suiteapi.Span
			for _, s := range spans {
				if s.Name != spanApply {
					continue
				}
				for _, l := range s.Links {
					if ids[l.SpanID] {
						found = append(found, s)
						break
					}
				}
			}
			r.addSpans(svc, found, true)
			return nil
		})
	}
	_ = g.Wait()
}

// readDedup reads each consumer's dedup record of each of the order's
// events.
func (t *Timelines) readDedup(ctx context.Context, r *reads) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(t.cfg.Concurrency)
	events := r.rows[suiteapi.Order]
	if len(events) > t.cfg.MaxEvents {
		events = events[len(events)-t.cfg.MaxEvents:]
	}
	for _, e := range events {
		for _, svc := range Consumers {
			g.Go(func() error {
				d, err := t.suite.Dedup(gctx, svc, e.EventID)
				if err != nil {
					r.fail(svc, "dedup record of "+e.EventID, err)
					return nil
				}
				r.mu.Lock()
				if r.dedup[e.EventID] == nil {
					r.dedup[e.EventID] = map[string]suiteapi.Dedup{}
				}
				r.dedup[e.EventID][svc] = d
				r.mu.Unlock()
				return nil
			})
		}
	}
	_ = g.Wait()
}

// The names of the spans the suite records (pkg/outbox, pkg/consumer,
// pkg/inbox); a request's span is named "METHOD route".
const (
	spanWrite   = "outbox write"
	spanSend    = "outbox send "
	spanConsume = "consume "
	spanApply   = "inbox apply"
)

// assemble puts what was read together: the entries on one time axis,
// the traces as waterfalls, the events with their dedup outcomes.
func assemble(orderID string, r *reads, now time.Time) Timeline {
	tl := Timeline{OrderID: orderID, Order: r.order, Clocks: Clocks(), Entries: []Entry{}, Traces: []Trace{},
		Events: []Event{}, DeadLetters: r.deadLetters, Findings: r.findings, Unread: r.unread, ReadAt: now.UTC(),
		Mismatches: []suiteapi.Mismatch{}}
	if r.convergence != nil {
		converged := r.convergence.Converged
		tl.Converged = &converged
		if r.convergence.Mismatches != nil {
			tl.Mismatches = r.convergence.Mismatches
		}
	}
	if tl.DeadLetters == nil {
		tl.DeadLetters = []DeadLetter{}
	}
	if tl.Findings == nil {
		tl.Findings = []suiteapi.Finding{}
	}
	if tl.Unread == nil {
		tl.Unread = []Unread{}
	}
	slices.SortFunc(tl.Unread, func(a, b Unread) int { return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.What, b.What)) })

	// What each message span carried, for the transaction that links it.
	carried := map[string]spanFrom{}
	for _, s := range r.spans {
		if strings.HasPrefix(s.Name, spanConsume) {
			carried[s.SpanID] = s
		}
	}
	spanned := map[string]bool{} // "step eventId service" seen in a span
	for _, s := range r.spans {
		if s.Name == spanApply {
			tl.Entries = append(tl.Entries, applies(s, carried)...)
			continue
		}
		e, ok := classify(s)
		if !ok {
			continue
		}
		tl.Entries = append(tl.Entries, e)
		spanned[e.Step+" "+e.EventID+" "+e.Service] = true
	}
	for _, svc := range Producers {
		for _, row := range r.rows[svc] {
			if !spanned[StepCommitted+" "+row.EventID+" "+svc] {
				tl.Entries = append(tl.Entries, Entry{Service: svc, Step: StepCommitted, At: row.CreatedAt, Clock: ClockOutbox,
					TraceID: row.TraceID, EventID: row.EventID, EventType: row.EventType, Source: SourceOutbox})
			}
			sent := sendStep(svc)
			if row.SentAt != nil && !spanned[sent+" "+row.EventID+" "+svc] {
				tl.Entries = append(tl.Entries, Entry{Service: svc, Step: sent, At: *row.SentAt, Clock: ClockOutbox,
					TraceID: row.TraceID, EventID: row.EventID, EventType: row.EventType, Source: SourceOutbox})
			}
			ev := Event{Producer: svc, EventID: row.EventID, EventType: row.EventType, Status: row.Status, Attempts: row.Attempts,
				CreatedAt: row.CreatedAt, SentAt: row.SentAt, TraceID: row.TraceID}
			if d, ok := r.dedup[row.EventID]; ok {
				ev.Dedup = map[string]Dedup{}
				for svc, rec := range d {
					ev.Dedup[svc] = dedupOutcome(rec)
				}
			}
			tl.Events = append(tl.Events, ev)
		}
	}
	for _, d := range r.deadLetters {
		tl.Entries = append(tl.Entries, Entry{Service: d.Service, Step: StepDeadLettered, At: d.DeadLetteredAt, Clock: ClockConsumer,
			EventID: d.EventID, EventType: d.EventType, Detail: d.ErrorClass + ", " + d.Status, Error: d.FailureReason, Source: SourceDLQ})
	}
	for _, f := range r.findings {
		detail := f.Kind + " at " + f.Service + ": expected " + f.Expected + ", found " + f.Actual
		if f.Action != "" {
			detail += "; " + f.Action
			if f.Outcome != "" {
				detail += " (" + f.Outcome + ")"
			}
		}
		tl.Entries = append(tl.Entries, Entry{Service: suiteapi.Reconciliation, Step: StepFinding, At: f.DetectedAt,
			Detail: detail, Source: SourceReconciliation})
	}
	slices.SortStableFunc(tl.Entries, func(a, b Entry) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(stepRank[a.Step], stepRank[b.Step]), cmp.Compare(a.Service, b.Service),
			cmp.Compare(a.EventID, b.EventID), cmp.Compare(a.SpanID, b.SpanID))
	})
	slices.SortStableFunc(tl.Events, func(a, b Event) int { return a.CreatedAt.Compare(b.CreatedAt) })
	tl.Traces = traces(r)
	return tl
}

// sendStep is the step of a producer's relay sending: the order service
// sends events to Kafka, the others callbacks to the order service.
func sendStep(producer string) string {
	if producer == suiteapi.Order {
		return StepSent
	}
	return StepCallbackSent
}

// classify says which step of the journey a span other than a
// transaction's is, if any: requests that change something, outbox writes
// and sends, messages received. Reads are not steps.
func classify(s spanFrom) (Entry, bool) {
	e := spanEntry(s)
	switch {
	case s.Name == spanWrite:
		e.Step, e.Clock = StepCommitted, ClockOutbox
	case strings.HasPrefix(s.Name, spanSend):
		e.Step, e.Clock = StepSent, ClockOutbox
		if strings.TrimPrefix(s.Name, spanSend) == outbox.CallbackTopic {
			e.Step = StepCallbackSent
		}
	case strings.HasPrefix(s.Name, spanConsume):
		e.Step, e.Clock = StepReceived, ClockConsumer
	case s.Kind == "server":
		method, route, _ := strings.Cut(s.Name, " ")
		switch {
		case method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions:
			return Entry{}, false
		case strings.HasSuffix(route, "/callback"):
			e.Step, e.Clock = StepCallbackReceived, ClockOutbox
		case strings.HasPrefix(route, "/admin/"):
			e.Step, e.Clock = StepOperator, ClockRequest
		default:
			e.Step, e.Clock = StepRequest, ClockRequest
		}
	default:
		return Entry{}, false
	}
	return e, true
}

// spanEntry is the entry of span s, before its step is known.
func spanEntry(s spanFrom) Entry {
	e := Entry{Service: s.from, At: s.Start, DurationMs: s.DurationMs, TraceID: s.TraceID, SpanID: s.SpanID,
		EventID: s.Attributes["event.id"], EventType: s.Attributes["event.type"], Detail: s.Name, Source: SourceTrace}
	if s.Status == "Error" {
		e.Error = cmp.Or(s.StatusText, "failed")
	}
	return e
}

// applies are the steps of a consumer's transaction (span s): one for each
// of the order's events it carried (the message spans it links), named by
// what the transaction did with that event.
func applies(s spanFrom, carried map[string]spanFrom) []Entry {
	ids, outcomes := jsonList(s.Attributes[inbox.AttrEventIDs]), jsonList(s.Attributes[inbox.AttrOutcomes])
	var out []Entry
	for _, l := range s.Links {
		m, ok := carried[l.SpanID]
		if !ok || m.from != s.from {
			continue
		}
		e := spanEntry(s)
		e.Clock, e.EventID, e.EventType = ClockConsumer, m.Attributes["event.id"], m.Attributes["event.type"]
		if i := slices.Index(ids, e.EventID); i >= 0 && i < len(outcomes) {
			e.Outcome = outcomes[i]
		}
		e.Step = applyStep(e.Outcome, e.Error != "")
		if s.linked {
			e.Detail += " (a batch in trace " + s.TraceID + ")"
		}
		out = append(out, e)
	}
	return out
}

// applyStep names what a transaction did with an event.
func applyStep(outcome string, failed bool) string {
	switch {
	case failed:
		return StepApplyFailed
	case outcome == string(inbox.Duplicate):
		return StepDuplicate
	case outcome == string(versionguard.IgnoredStale):
		return StepStale
	case outcome == string(versionguard.WaitingForGap):
		return StepParked
	}
	// APPLIED, APPLIED_LATE_FACT, or a service that does not say.
	return StepApplied
}

// jsonList reads a string list attribute as a span keeps it (["a","b"]);
// anything else is no list.
func jsonList(v string) []string {
	var out []string
	if json.Unmarshal([]byte(v), &out) != nil {
		return nil
	}
	return out
}

// dedupOutcome says a dedup record in words.
func dedupOutcome(d suiteapi.Dedup) Dedup {
	out := Dedup{Processed: d.Count > 0, Duplicates: d.Duplicates}
	switch {
	case d.Count == 0:
		out.Outcome = "not processed"
	case d.Duplicates == 0:
		out.Outcome = "processed once"
	case d.Duplicates == 1:
		out.Outcome = "processed once, 1 duplicate ignored"
	default:
		out.Outcome = fmt.Sprintf("processed once, %d duplicates ignored", d.Duplicates)
	}
	return out
}

// traces groups the spans by trace, each oldest first with its depth; the
// traces in the order they began. A span found by its link is drawn in
// the trace whose message it applied.
func traces(r *reads) []Trace {
	byTrace := map[string][]spanFrom{}
	home := map[string]string{} // message span id → its trace
	for _, s := range r.spans {
		if !s.linked {
			byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
			home[s.SpanID] = s.TraceID
		}
	}
	for _, s := range r.spans {
		if !s.linked {
			continue
		}
		for _, l := range s.Links {
			if id, ok := home[l.SpanID]; ok {
				byTrace[id] = append(byTrace[id], s)
				break
			}
		}
	}
	out := make([]Trace, 0, len(byTrace))
	for id, spans := range byTrace {
		slices.SortFunc(spans, func(a, b spanFrom) int { return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.SpanID, b.SpanID)) })
		parent := map[string]string{}
		inTrace := map[string]bool{}
		for _, s := range spans {
			inTrace[s.SpanID] = true
			parent[s.SpanID] = s.ParentSpanID
			if s.linked && len(s.Links) > 0 {
				// Drawn under the message it applied.
				for _, l := range s.Links {
					if home[l.SpanID] == id {
						parent[s.SpanID] = l.SpanID
						break
					}
				}
			}
		}
		tr := Trace{TraceID: id, Start: spans[0].Start, End: spans[0].End, Spans: make([]Span, len(spans))}
		for i, s := range spans {
			depth := 0
			for p := parent[s.SpanID]; inTrace[p] && depth < len(spans); p = parent[p] {
				depth++
			}
			tr.Spans[i] = Span{Span: s.Span, From: s.from, Depth: depth, Linked: s.linked}
			if tr.Root == "" && !inTrace[s.ParentSpanID] && !s.linked {
				tr.Root = s.from + ": " + s.Name
			}
			if s.End.After(tr.End) {
				tr.End = s.End
			}
			if !slices.Contains(tr.Services, s.from) {
				tr.Services = append(tr.Services, s.from)
			}
		}
		out = append(out, tr)
	}
	slices.SortFunc(out, func(a, b Trace) int { return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.TraceID, b.TraceID)) })
	return out
}
