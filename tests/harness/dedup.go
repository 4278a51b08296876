package harness

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// Dedup is a consumer's dedup record of one event.
type Dedup = suiteapi.Dedup

// Dedup reads a consumer's dedup record of eventID.
func (s *Suite) Dedup(service, eventID string) Dedup {
	s.t.Helper()
	d, err := s.api.Dedup(ctx(), service, eventID)
	s.must(err)
	return d
}

// DeadLetters counts a consumer's dead letters of an aggregate, replayed
// or not.
func (s *Suite) DeadLetters(service, aggregateID string) int {
	s.t.Helper()
	items, err := s.api.DeadLetters(ctx(), service, aggregateID, "")
	s.must(err)
	return len(items)
}

// Tally is what a consumer's process has done with the messages it read
// since it started, from its /metrics.
type Tally struct {
	// Read counts the messages it finished: handled (ok, or a recorded
	// business rejection) or dead-lettered. Retries of one message count
	// once, when it is finished.
	Read float64
	// Outcomes counts what the inbox did with the events
	// (consumer_event_outcomes_total): APPLIED, DUPLICATE,
	// IGNORED_STALE_EVENT, WAITING_FOR_GAP, NOT_HANDLED.
	Outcomes map[string]float64
}

// Tallies are the tallies of several consumers, by service.
type Tallies map[string]Tally

// Tallies reads the tallies of the named consumers.
func (s *Suite) Tallies(services ...string) Tallies {
	s.t.Helper()
	out := Tallies{}
	for _, svc := range services {
		out[svc] = s.tally(svc)
	}
	return out
}

func (s *Suite) tally(service string) Tally {
	s.t.Helper()
	code, raw, err := s.api.Raw(ctx(), service, "GET", "/metrics", nil, nil)
	s.must(err)
	if code != 200 {
		s.t.Fatalf("%s /metrics: %d", service, code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		s.t.Fatalf("%s /metrics: %v", service, err)
	}
	t := Tally{Outcomes: map[string]float64{}}
	for _, name := range []string{"consumer_messages_total", "consumer_dead_letters_total", "consumer_event_outcomes_total"} {
		f, ok := families[name]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			v := m.GetCounter().GetValue()
			switch name {
			case "consumer_messages_total":
				if o := labels["outcome"]; o == "ok" || o == "rejected" {
					t.Read += v
				}
			case "consumer_dead_letters_total":
				t.Read += v
			default:
				t.Outcomes[labels["outcome"]] += v
			}
		}
	}
	return t
}

// Since is t minus an earlier tally of the same processes; a service
// missing from before counts from zero.
func (t Tallies) Since(before Tallies) Tallies {
	out := Tallies{}
	for svc, now := range t {
		was := before[svc]
		d := Tally{Read: now.Read - was.Read, Outcomes: map[string]float64{}}
		for o, v := range now.Outcomes {
			d.Outcomes[o] = v - was.Outcomes[o]
		}
		out[svc] = d
	}
	return out
}

// WaitRead waits until every consumer named in read has finished at least
// read[service] messages since the tallies before (nil: since it started)
// and returns the tallies since before. It fails the test on timeout,
// naming the consumers that are short. It waits on messages read, not on
// outcomes, so it ends whatever the consumers made of the copies.
func (s *Suite) WaitRead(timeout time.Duration, before Tallies, read map[string]int) Tallies {
	s.t.Helper()
	services := make([]string, 0, len(read))
	for svc := range read {
		services = append(services, svc)
	}
	slices.Sort(services)
	var since Tallies
	_, ok := waitFor(timeout, func() bool {
		since = s.Tallies(services...).Since(before)
		for _, svc := range services {
			if since[svc].Read < float64(read[svc]) {
				return false
			}
		}
		return true
	})
	if !ok {
		var short []string
		for _, svc := range services {
			if got := since[svc].Read; got < float64(read[svc]) {
				short = append(short, fmt.Sprintf("%s read %v of %d", svc, got, read[svc]))
			}
		}
		s.t.Fatalf("within %v: %s", timeout, strings.Join(short, ", "))
	}
	return since
}
