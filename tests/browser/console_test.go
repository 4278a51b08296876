package browser_test

import (
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/reliable-orders/fulfillment/tests/harness"
)

// rowsScript reads the journey's rows of an order's page, top to bottom.
const rowsScript = `Array.from(document.querySelectorAll("#timeline tr.entry")).map(r => ({
	service: r.dataset.service, step: r.dataset.step, eventType: r.dataset.eventType,
	detail: (r.querySelector(".detail") || {}).textContent || "", trace: r.dataset.trace}))`

// row is one row of the journey as rowsScript reads it.
type row struct {
	Service   string `json:"service"`
	Step      string `json:"step"`
	EventType string `json:"eventType"`
	Detail    string `json:"detail"`
	Trace     string `json:"trace"`
}

// A paid order's page shows every service's step of the payment in the
// order they happened, all in the payment's trace, whose waterfall spans
// the five services.
func TestBrowserShowsAPaidOrdersJourney(t *testing.T) {
	exec := chromium(t)
	s := harness.Start(t, harness.Options{})
	console := s.StartConsole(nil)
	s.SetStock("SKU-B1", 10)
	s.PayOrder(harness.Order{ID: "O-B1", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-B1", Quantity: 1, UnitPrice: "30.00"}}})
	s.WaitSnapshot("O-B1", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 1, Notifications: 1, DLQ: 0}, 30*time.Second)

	b := newBrowser(t, exec, s.AdminToken, 1400, 1000)
	// The page refreshes itself every 2 s: the last consumer's apply
	// appears without a reload.
	b.do(30*time.Second, "open the order's page and wait for every consumer's apply",
		chromedp.Navigate(console+"/orders/O-B1"),
		chromedp.WaitVisible(chromedp.CSS(`#order-status`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline tr.entry[data-service="points"][data-step="applied"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline tr.entry[data-service="inventory"][data-step="applied"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline tr.entry[data-service="notification"][data-step="applied"]`)),
	)
	status := get(b, 10*time.Second, "read the order's status", chromedp.Text(chromedp.CSS(`#order-status`)))
	rows := get(b, 10*time.Second, "read the journey", chromedp.Evaluate[[]row](rowsScript))
	if status != "PAID" {
		t.Errorf("the page says the order is %q, want PAID", status)
	}
	steps := make([]harness.ConsoleStep, len(rows))
	for i, r := range rows {
		steps[i] = harness.ConsoleStep{Service: r.Service, Step: r.Step, EventType: r.EventType, Detail: r.Detail}
	}
	want := harness.PaidJourney()
	pos := harness.FindJourney(steps, want)
	for i, p := range pos {
		if p < 0 {
			t.Errorf("the page shows no %s after %s", want[i], want[max(want[i].After, 0)])
		}
	}
	if t.Failed() {
		for i, st := range steps {
			t.Logf("%2d %s", i, st)
		}
		t.FailNow()
	}
	trace := rows[pos[0]].Trace
	for i, p := range pos {
		if rows[p].Trace != trace {
			t.Errorf("%s is in trace %s, want the payment's %s", want[i], rows[p].Trace, trace)
		}
	}
	services := get(b, 10*time.Second, "read the payment's waterfall",
		chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.trace[data-trace="`+trace+`"] .span-row .svc')).map(e => e.textContent)`))
	for _, svc := range []string{"payment", "order", "inventory", "points", "notification"} {
		if !slices.Contains(services, svc) {
			t.Errorf("the payment's waterfall has spans of %v, want %s too", services, svc)
		}
	}
}

// Pressing replay on a dead letter, once the cause is fixed, applies it:
// the page asks first, names the operator, shows APPLIED, and the
// consumer's effect and audit follow.
func TestBrowserReplaysADeadLetter(t *testing.T) {
	exec := chromium(t)
	s := harness.Start(t, harness.Options{Env: map[string]string{"RETRY_MAX_ATTEMPTS": "3"}})
	console := s.StartConsole(nil)
	s.SetStock("SKU-B2", 10)
	s.FailConsumer("points", 1000)
	s.PayOrder(harness.Order{ID: "O-B2", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-B2", Quantity: 1, UnitPrice: "30.00"}}})
	s.WaitSnapshot("O-B2", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 0, Notifications: 1, DLQ: 1}, 30*time.Second)
	// The fix.
	s.ArmFailPoint("points", "points.apply", "off", 0)

	b := newBrowser(t, exec, s.AdminToken, 1400, 900)
	letter := `tr.dead-letter[data-service="points"][data-order="O-B2"]`
	b.do(30*time.Second, "open the dead letters and press replay",
		chromedp.Navigate(console+"/dlq"),
		chromedp.WaitVisible(chromedp.CSS(letter+` button`)),
		chromedp.SetValue(chromedp.CSS(letter+` input[name="operator"]`), "browser-test"),
		chromedp.Click(chromedp.CSS(letter+` button`)),
		chromedp.WaitVisible(chromedp.CSS(`#replay-log .replay-outcome`)),
	)
	outcome := get(b, 10*time.Second, "read the outcome", chromedp.AttributeValue(chromedp.CSS(`#replay-log .replay-outcome`), "data-outcome"))
	if outcome.Value != "APPLIED" {
		t.Fatalf("the replay's outcome is %+v, want APPLIED", outcome)
	}
	s.WaitSnapshot("O-B2", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 1, Notifications: 1, DLQ: 0}, 30*time.Second)
	letters, err := s.API().DeadLetters(t.Context(), "points", "O-B2", "")
	if err != nil || len(letters) != 1 {
		t.Fatalf("points' dead letters of O-B2: %v %v", letters, err)
	}
	_, audit, err := s.API().Inspect(t.Context(), "points", letters[0].ID)
	if err != nil || len(audit) != 1 || audit[0].RequestedBy != "browser-test" || audit[0].Outcome != "APPLIED" {
		t.Errorf("the replay's audit: %+v %v, want one APPLIED replay by browser-test", audit, err)
	}
	// The list refreshes itself: the letter is no longer DEAD.
	b.do(30*time.Second, "the letter leaves the list of DEAD ones", chromedp.WaitNotPresent(chromedp.CSS(letter)))
}
