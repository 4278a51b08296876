package browser_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// ScreenshotsEnv names the directory TestConsoleScreenshots writes the
// pictures of docs/console.md into; `make screenshots` sets it.
const ScreenshotsEnv = "CONSOLE_SCREENSHOTS"

// TestConsoleScreenshots takes the pictures of the learner's guide to the
// console (docs/console.md) from a suite of its own: the walk-through's
// order paid and partly refunded, an order whose points are
// dead-lettered, a burst of events the consumers drain, a drill run. It
// runs only for `make screenshots`.
func TestConsoleScreenshots(t *testing.T) {
	dir := os.Getenv(ScreenshotsEnv)
	if dir == "" {
		t.Skip(ScreenshotsEnv + " is not set: `make screenshots` regenerates the pictures of docs/console.md")
	}
	exec := chromium(t)
	s := harness.Start(t, harness.Options{Env: map[string]string{"RETRY_MAX_ATTEMPTS": "3"}})
	console := s.StartConsole(map[string]string{"CONSOLE_SAMPLE_INTERVAL": "500ms"})
	b := newBrowser(t, exec, s.AdminToken, 1400, 900)
	shoot := func(name, path, ready, element string) {
		t.Helper()
		b.do(60*time.Second, "open "+path, chromedp.Navigate(console+path), chromedp.WaitVisible(chromedp.CSS(ready)))
		png := get(b, 30*time.Second, "screenshot "+name, chromedp.Screenshot(chromedp.CSS(element)))
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d KiB)", filepath.Join(dir, name), len(png)/1024)
	}

	// The walk-through's order, paid, then one of its two units returned.
	s.SetStock("SKU-1", 100)
	s.PayOrder(harness.Order{ID: "O-1001", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: "40.00"}}})
	s.WaitSnapshot("O-1001", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 1, Notifications: 1, DLQ: 0}, 30*time.Second)
	if _, err := s.API().Refund(t.Context(), "O-1001", "screenshots-refund",
		suiteapi.Refund{Items: []suiteapi.Line{{SKU: "SKU-1", Quantity: 1}}}); err != nil {
		t.Fatal(err)
	}
	s.WaitSnapshot("O-1001", harness.Snapshot{Order: "PARTIALLY_REFUNDED", OrderVersion: 5, Payment: "PARTIALLY_REFUNDED",
		Inventory: "PARTIALLY_RESTOCKED", PointsLedger: 2, Notifications: 2, DLQ: 0}, 30*time.Second)
	shoot("order.png", "/orders/O-1001", `#timeline tr.entry[data-service="points"][data-step="applied"]`, "#journey")
	trace := paymentTrace(t, console, s.AdminToken, "O-1001")
	shoot("waterfall.png", "/orders/O-1001", `.trace[data-trace="`+trace+`"]`, `.trace[data-trace="`+trace+`"]`)

	// An order whose points fail until the fix: a dead letter to replay.
	s.FailConsumer("points", 1000)
	s.PayOrder(harness.Order{ID: "O-1002", Customer: "C-2", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: "25.00"}}})
	s.WaitSnapshot("O-1002", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 0, Notifications: 1, DLQ: 1}, 30*time.Second)
	s.ArmFailPoint("points", "points.apply", "off", 0)
	shoot("dlq.png", "/dlq", `tr.dead-letter[data-order="O-1002"]`, "main")

	// A burst the consumers drain, watched on their charts.
	b.do(30*time.Second, "open the charts", chromedp.Navigate(console+"/consumers"), chromedp.WaitVisible(chromedp.CSS("#consumers")))
	s.SetStock("SKU-LOAD", 1_000_000)
	var burst []event.Envelope
	for i := range 20000 {
		burst = append(burst, s.Events(fmt.Sprintf("O-LOAD-%05d", i), "SKU-LOAD", 1, "10.00").Paid())
	}
	s.Publish(burst...)
	busy := map[string]bool{}
	s.WaitUntil(3*time.Minute, "the burst drained", func() bool { return drained(t, console, s.AdminToken, busy) })
	shoot("consumers.png", "/consumers", `.consumer[data-service="inventory"] polyline`, "main")

	// A drill, and the switches.
	code, run := consoleJSON(t, console, s.AdminToken, "POST", "/api/drills/runs", `{"selection":"duplicate/twice","operator":"learner"}`)
	if code != http.StatusAccepted {
		t.Fatalf("start a drill: %d %v", code, run)
	}
	s.WaitUntil(2*time.Minute, "the drill's verdict", func() bool {
		_, r := consoleJSON(t, console, s.AdminToken, "GET", fmt.Sprintf("/api/drills/runs/%v", run["id"]), "")
		return r["status"] == "DONE"
	})
	shoot("drills.png", "/drills", `tr.verdict[data-case="duplicate/twice"]`, "main")
	shoot("switches.png", "/switches", `.switch[data-service="points"] tr[data-failpoint="points.apply"]`, "main")
}

// consoleJSON calls the console's API with the admin token.
func consoleJSON(t *testing.T, console, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, console+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out) // the status is judged by the caller
	return resp.StatusCode, out
}

// paymentTrace is the trace of the order's POST /payments.
func paymentTrace(t *testing.T, console, token, orderID string) string {
	t.Helper()
	_, tl := consoleJSON(t, console, token, "GET", "/api/orders/"+orderID+"/timeline", "")
	entries, _ := tl["entries"].([]any)
	for _, e := range entries {
		m := e.(map[string]any)
		if m["service"] == "payment" && m["detail"] == "POST /payments" {
			return m["traceId"].(string)
		}
	}
	t.Fatalf("no payment request in the timeline of %s", orderID)
	return ""
}

// drained reports whether each consumer of the burst has shown a
// throughput, this look or an earlier one (busy), and now shows neither
// lag nor throughput: the whole bump is on its charts.
func drained(t *testing.T, console, token string, busy map[string]bool) bool {
	t.Helper()
	_, out := consoleJSON(t, console, token, "GET", "/api/consumers", "")
	series, _ := out["consumers"].([]any)
	idle := true
	for _, x := range series {
		svc, _ := x.(map[string]any)["service"].(string)
		samples, _ := x.(map[string]any)["samples"].([]any)
		if len(samples) == 0 {
			return false
		}
		for _, smp := range samples {
			if smp.(map[string]any)["consumedPerSecond"].(float64) > 0 {
				busy[svc] = true
			}
		}
		last := samples[len(samples)-1].(map[string]any)
		idle = idle && last["totalLag"].(float64) == 0 && last["consumedPerSecond"].(float64) == 0
	}
	return idle && busy["inventory"] && busy["points"] && busy["notification"]
}
