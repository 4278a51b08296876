package versionguard_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// refunds is a table in which a type is legal from several states and an
// event type repeats (a second refund after a rejected one), as in the
// points and payment consumers.
var refunds = versionguard.Transitions{
	event.OrderPaid:            {versionguard.InitialState},
	event.OrderRefundRequested: {"PAID", "REFUND_REJECTED"},
	event.OrderRefundRejected:  {"REFUNDING"},
	event.OrderRefunded:        {"REFUNDING", "PAID"},
	event.OrderCancelled:       {versionguard.InitialState, "PAID"},
}

var refundsNext = map[event.Type]string{
	event.OrderPaid: "PAID", event.OrderRefundRequested: "REFUNDING", event.OrderRefundRejected: "REFUND_REJECTED",
	event.OrderRefunded: "REFUNDED", event.OrderCancelled: "CANCELLED",
}

var fuzzTypes = []event.Type{event.OrderCreated, event.OrderCheckedOut, event.OrderPaid, event.OrderRefundRequested,
	event.OrderRefundRejected, event.OrderRefunded, event.OrderCancelled}

// consumerModel replays deliveries of one aggregate the way the guard does
// with its database: APPLIED moves the position, WAITING_FOR_GAP parks,
// and every APPLIED drains the parked events in version order until one
// must wait.
type consumerModel struct {
	t           *testing.T
	transitions versionguard.Transitions
	next        map[event.Type]string
	cur         versionguard.Position
	parked      []event.Envelope
	applied     []int64
}

// decide asks the guard and checks the answer against the table.
func (m *consumerModel) decide(env event.Envelope) versionguard.Outcome {
	m.t.Helper()
	before := maps.Clone(m.transitions)
	got := m.transitions.Decide(m.cur, env)
	if again := m.transitions.Decide(m.cur, env); again != got {
		m.t.Fatalf("Decide(%+v, %s v%d) answered %s, then %s", m.cur, env.EventType, env.AggregateVersion, got, again)
	}
	if !maps.EqualFunc(before, m.transitions, slices.Equal) {
		m.t.Fatal("Decide changed the transition table")
	}
	var want versionguard.Outcome
	switch {
	case env.AggregateVersion <= m.cur.Version:
		want = versionguard.IgnoredStale
	case slices.Contains(m.transitions[env.EventType], m.cur.State):
		want = versionguard.Applied
	default:
		want = versionguard.WaitingForGap
	}
	if got != want {
		m.t.Fatalf("Decide(%+v, %s v%d) = %s; the table says %s", m.cur, env.EventType, env.AggregateVersion, got, want)
	}
	return got
}

func (m *consumerModel) apply(env event.Envelope) {
	m.t.Helper()
	if env.AggregateVersion <= m.cur.Version {
		m.t.Fatalf("a stale event was applied: v%d at position %+v", env.AggregateVersion, m.cur)
	}
	if slices.Contains(m.applied, env.AggregateVersion) {
		m.t.Fatalf("version %d was applied twice (applied so far %v)", env.AggregateVersion, m.applied)
	}
	m.applied = append(m.applied, env.AggregateVersion)
	m.cur = versionguard.Position{Version: env.AggregateVersion, State: m.next[env.EventType]}
}

// deliver is one delivery of env (every delivery of the same event is
// decided again: the inbox is what drops exact duplicates, and the guard
// must be safe without it).
func (m *consumerModel) deliver(env event.Envelope) {
	m.t.Helper()
	switch m.decide(env) {
	case versionguard.IgnoredStale:
		return
	case versionguard.WaitingForGap:
		if !slices.ContainsFunc(m.parked, func(p event.Envelope) bool { return p.EventID == env.EventID }) {
			m.parked = append(m.parked, env)
		}
		return
	}
	m.apply(env)
	if again := m.decide(env); again != versionguard.IgnoredStale {
		m.t.Fatalf("the event just applied (%s v%d) is decided %s the second time, want %s",
			env.EventType, env.AggregateVersion, again, versionguard.IgnoredStale)
	}
	m.drain()
}

func (m *consumerModel) drain() {
	m.t.Helper()
	slices.SortStableFunc(m.parked, func(a, b event.Envelope) int { return int(a.AggregateVersion - b.AggregateVersion) })
	for len(m.parked) > 0 {
		env := m.parked[0]
		switch m.decide(env) {
		case versionguard.WaitingForGap:
			return
		case versionguard.Applied:
			m.apply(env)
		}
		m.parked = m.parked[1:]
	}
}

// FuzzDecide: the guard's decision is a pure function of the position and
// the event, consistent with the transition table; whatever the deliveries
// (duplicated, reordered, with gaps), a stale event is never applied, no
// version is applied twice, the applied versions only grow, and the first
// parked event (in version order) never waits at a position it could be
// applied from.
//
// Each pair of input bytes is one delivery: the event type and the
// aggregate version (1 to 16); an event is identified by both, so the
// same pair twice is a redelivery.
func FuzzDecide(f *testing.F) {
	f.Add(false, []byte{0, 1, 1, 2, 2, 3})              // created, checked out, paid in order
	f.Add(false, []byte{2, 3, 0, 1, 2, 3, 1, 2, 1, 2})  // paid first, duplicates
	f.Add(true, []byte{2, 1, 3, 2, 4, 3, 3, 4, 5, 5})   // refund rejected, then refunded
	f.Add(true, []byte{5, 5, 3, 4, 4, 3, 3, 2, 2, 1})   // the same, reversed
	f.Add(true, []byte{2, 1, 5, 4, 6, 3, 3, 2, 5, 4})   // refunded past a gap
	f.Add(true, []byte{6, 1, 2, 2, 6, 1, 2, 2, 255, 0}) // cancelled before paid
	f.Fuzz(func(t *testing.T, refundTable bool, deliveries []byte) {
		m := &consumerModel{t: t, transitions: chain, next: next, cur: versionguard.Position{State: versionguard.InitialState}}
		if refundTable {
			m.transitions, m.next = refunds, refundsNext
		}
		for i := 0; i+1 < len(deliveries); i += 2 {
			typ := fuzzTypes[int(deliveries[i])%len(fuzzTypes)]
			version := int64(1 + deliveries[i+1]%16)
			m.deliver(event.Envelope{EventID: fmt.Sprintf("E-%s-%d", typ, version), EventType: typ,
				AggregateID: "O-1", AggregateVersion: version})
			if !slices.IsSorted(m.applied) {
				t.Fatalf("applied versions %v are out of order", m.applied)
			}
			if len(m.parked) > 0 && m.transitions.Decide(m.cur, m.parked[0]) == versionguard.Applied {
				p := m.parked[0]
				t.Fatalf("%s v%d, the first parked event, stays parked at position %+v, from which it applies",
					p.EventType, p.AggregateVersion, m.cur)
			}
		}
	})
}
