package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/tests/harness"
)

// consoleTimeline is the part of the console's GET
// /api/orders/{orderId}/timeline the tests read.
type consoleTimeline struct {
	OrderID string `json:"orderId"`
	Entries []struct {
		Service   string    `json:"service"`
		Step      string    `json:"step"`
		At        time.Time `json:"at"`
		TraceID   string    `json:"traceId"`
		EventType string    `json:"eventType"`
		Detail    string    `json:"detail"`
		Source    string    `json:"source"`
	} `json:"entries"`
	Traces []struct {
		TraceID  string   `json:"traceId"`
		Services []string `json:"services"`
	} `json:"traces"`
	Events []struct {
		Producer  string `json:"producer"`
		EventType string `json:"eventType"`
		Dedup     map[string]struct {
			Processed bool `json:"processed"`
		} `json:"dedup"`
	} `json:"events"`
	Unread []struct {
		Service, What, Error string
	} `json:"unread"`
}

// readTimeline reads the console's timeline of orderID.
func readTimeline(t *testing.T, client *http.Client, console, token, orderID string) consoleTimeline {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, console+"/api/orders/"+orderID+"/timeline", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET timeline: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET timeline: %d", resp.StatusCode)
	}
	var tl consoleTimeline
	if err := json.NewDecoder(resp.Body).Decode(&tl); err != nil {
		t.Fatalf("decode timeline: %v", err)
	}
	return tl
}

// steps are the timeline's entries as the journey's steps.
func (tl consoleTimeline) steps() []harness.ConsoleStep {
	out := make([]harness.ConsoleStep, len(tl.Entries))
	for i, e := range tl.Entries {
		out[i] = harness.ConsoleStep{Service: e.Service, Step: e.Step, EventType: e.EventType, Detail: e.Detail}
	}
	return out
}

// The console's timeline of a paid order has every service's step in the
// order the payment caused them, all in the payment's trace, with each
// consumer's dedup record of OrderPaid.
func TestConsoleTimelineOfAPaidOrder(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	console := s.StartConsole(nil)
	client := &http.Client{Timeout: 10 * time.Second}
	s.SetStock("SKU-C1", 10)
	s.PayOrder(harness.Order{ID: "O-C1", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-C1", Quantity: 2, UnitPrice: "12.50"}}})
	s.WaitSnapshot("O-C1", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 1, Notifications: 1, DLQ: 0}, 30*time.Second)

	want := harness.PaidJourney()
	var tl consoleTimeline
	var pos []int
	// The consumers' spans end as their transactions commit, a moment
	// after the effects the snapshot reads are visible.
	s.WaitUntil(10*time.Second, "every step of the payment in the console's timeline", func() bool {
		tl = readTimeline(t, client, console, s.AdminToken, "O-C1")
		pos = harness.FindJourney(tl.steps(), want)
		return !slices.Contains(pos, -1)
	})
	if len(tl.Unread) > 0 {
		t.Errorf("parts of the timeline were not read: %+v", tl.Unread)
	}
	trace := tl.Entries[pos[0]].TraceID
	if len(trace) != 32 {
		t.Fatalf("the payment request has trace %q", trace)
	}
	services := map[string]bool{}
	for i, w := range want {
		e := tl.Entries[pos[i]]
		services[e.Service] = true
		if e.TraceID != trace {
			t.Errorf("%s: trace %s, want the payment's %s", w, e.TraceID, trace)
		}
		if e.Source != "trace" {
			t.Errorf("%s: read from %q, want a span", w, e.Source)
		}
		if w.After >= 0 && e.At.Before(tl.Entries[pos[w.After]].At) {
			t.Errorf("%s at %s, before %s at %s", w, e.At, want[w.After], tl.Entries[pos[w.After]].At)
		}
	}
	if len(services) != 5 {
		t.Errorf("the payment's steps are at %d services, want 5: %v", len(services), services)
	}
	for i := 1; i < len(tl.Entries); i++ {
		if tl.Entries[i].At.Before(tl.Entries[i-1].At) {
			t.Errorf("entry %d at %s is before entry %d at %s: the time axis is not in order", i, tl.Entries[i].At, i-1, tl.Entries[i-1].At)
		}
	}
	var paymentTrace []string
	for _, tr := range tl.Traces {
		if tr.TraceID == trace {
			paymentTrace = tr.Services
		}
	}
	for _, svc := range []string{"payment", "order", "inventory", "points", "notification"} {
		if !slices.Contains(paymentTrace, svc) {
			t.Errorf("the payment's trace spans %v, want %s too", paymentTrace, svc)
		}
	}
	// The order's creation and checkout are traces of their own.
	for _, detail := range []string{"POST /orders", "POST /orders/:id/checkout"} {
		found := false
		for _, e := range tl.Entries {
			if e.Service == "order" && e.Step == "request accepted" && e.Detail == detail {
				found = e.TraceID != trace
			}
		}
		if !found {
			t.Errorf("no %s request in a trace of its own", detail)
		}
	}
	for _, ev := range tl.Events {
		if ev.Producer != "order" || ev.EventType != "OrderPaid" {
			continue
		}
		for _, c := range []string{"inventory", "points", "notification"} {
			if !ev.Dedup[c].Processed {
				t.Errorf("%s has no dedup record of OrderPaid: %+v", c, ev.Dedup)
			}
		}
	}

	// A copy of OrderPaid (the row republished with its eventId): each
	// consumer receives it again, and its transaction recognises the
	// duplicate instead of applying it twice.
	paid := s.OutboxRow("order", "O-C1", "OrderPaid")
	if code, raw, err := s.API().Raw(t.Context(), "order", http.MethodPost, "/admin/outbox/"+paid.EventID+"/republish",
		http.Header{"X-Operator": {"e2e"}}, nil); err != nil || code != http.StatusOK {
		t.Fatalf("republish OrderPaid: %d %s %v", code, raw, err)
	}
	count := func(service, step string) int {
		n := 0
		for _, e := range tl.Entries {
			if e.Service == service && e.Step == step && e.EventType == "OrderPaid" {
				n++
			}
		}
		return n
	}
	s.WaitUntil(30*time.Second, "every consumer's duplicate in the timeline", func() bool {
		tl = readTimeline(t, client, console, s.AdminToken, "O-C1")
		for _, c := range []string{"inventory", "points", "notification"} {
			if count(c, "duplicate ignored") != 1 {
				return false
			}
		}
		return true
	})
	for _, c := range []string{"inventory", "points", "notification"} {
		if n := count(c, "applied"); n != 1 {
			t.Errorf("%s applied OrderPaid %d times in the timeline, want 1", c, n)
		}
	}
	if t.Failed() {
		for i, e := range tl.Entries {
			t.Logf("%2d %s %-13s %-18s %-18s %s %s", i, e.At.Format("15:04:05.000000"), e.Service, e.Step, e.EventType, e.Detail, e.TraceID)
		}
	}
}

// consoleCall sends a command to the console as its pages do: JSON, with
// the admin token; it returns the status and the decoded answer.
func consoleCall(t *testing.T, client *http.Client, console, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, console+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out) // the status is judged by the caller
	return resp.StatusCode, out
}

// The console runs a drill and reports its verdict, arms a fail point
// that then fires in the service, and says a stop needs a control API
// when it has none.
func TestConsoleRunsADrillAndFlipsSwitches(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	console := s.StartConsole(nil)
	client := &http.Client{Timeout: 30 * time.Second}
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		return consoleCall(t, client, console, s.AdminToken, method, path, body)
	}

	code, run := call("POST", "/api/drills/runs", `{"selection":"duplicate/twice","operator":"e2e"}`)
	if code != http.StatusAccepted || run["status"] != "QUEUED" {
		t.Fatalf("start the drill: %d %v", code, run)
	}
	if code, again := call("POST", "/api/drills/runs", `{"selection":"duplicate"}`); code != http.StatusConflict {
		t.Errorf("a second run while one runs: %d %v, want 409", code, again)
	}
	path := fmt.Sprintf("/api/drills/runs/%d", int(run["id"].(float64)))
	s.WaitUntil(2*time.Minute, "the drill's verdict", func() bool {
		_, run = call("GET", path, "")
		return run["status"] == "DONE"
	})
	results, _ := run["results"].([]any)
	if len(results) != 1 || results[0].(map[string]any)["verdict"] != "PASS" {
		t.Errorf("the drill's results: %v, want duplicate/twice PASS", results)
	}

	if code, out := call("POST", "/api/failpoints/points/points.apply", `{"action":"error","times":1,"operator":"e2e"}`); code != http.StatusOK {
		t.Fatalf("arm points.apply: %d %v", code, out)
	}
	s.SetStock("SKU-C2", 10)
	s.PayOrder(harness.Order{ID: "O-C2", Customer: "C-1", Currency: "CNY", Items: []harness.Item{{SKU: "SKU-C2", Quantity: 1, UnitPrice: "5.00"}}})
	s.WaitFailPointFired("points", "points.apply", 1, 30*time.Second)
	// Retried past the one failure: applied.
	s.WaitSnapshot("O-C2", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 1, Notifications: 1, DLQ: 0}, 30*time.Second)

	if code, out := call("POST", "/api/services/points/stop", `{}`); code != http.StatusConflict || out["businessCode"] != "NO_CONTROL_API" {
		t.Errorf("stop without a control API: %d %v, want 409 NO_CONTROL_API", code, out)
	}
}
