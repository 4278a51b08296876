package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
)

// saturated is a served server whose business routes are all taken by
// blocked handlers.
type saturated struct {
	url string
	// entered receives the path of each blocking request (/slow, /start)
	// as its handler runs.
	entered chan string
	// release lets one blocked /slow handler answer.
	release chan struct{}
	// outside receives, once per /lookup request whose call to another
	// service runs outside its slot, the channel whose closing answers
	// that call.
	outside chan chan struct{}
}

// serveAdmission serves a server admitting limit business requests, queued
// for at most 5 ms, with
// GET /slow blocking until released, POST /start blocking alike on a route
// that starts new work (Server.Initiating), GET /lookup blocking outside its
// slot (httpapi.OutsideSlot) until answered, GET /fast, an exempt POST
// /callback and an admin route behind the token "tok".
func serveAdmission(t *testing.T, limit int) *saturated {
	t.Helper()
	return serveQueue(t, httpapi.Admission{MaxInFlight: limit, QueueWait: 5 * time.Millisecond})
}

// serveQueue serves the routes of serveAdmission with admission a.
func serveQueue(t *testing.T, a httpapi.Admission) *saturated {
	t.Helper()
	s := httpapi.New(httpapi.Config{
		AdminToken: "tok",
		Registry:   observability.NewRegistry(),
		Ready:      func(context.Context) error { return nil },
		Admission:  a,
	}, slog.New(slog.DiscardHandler))
	sat := &saturated{entered: make(chan string, a.MaxInFlight), release: make(chan struct{}),
		outside: make(chan chan struct{})}
	ok := func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"businessCode": httpapi.CodeSuccess})
	}
	blocking := func(c echo.Context) error {
		sat.entered <- c.Path()
		select {
		case <-sat.release:
		case <-c.Request().Context().Done():
		}
		return ok(c)
	}
	s.Echo.GET("/slow", blocking)
	s.Echo.POST("/start", blocking)
	s.Initiating(http.MethodPost, "/start")
	s.Echo.GET("/lookup", func(c echo.Context) error {
		if err := httpapi.OutsideSlot(c.Request().Context(), func() error {
			answer := make(chan struct{})
			sat.outside <- answer
			<-answer
			return nil
		}); err != nil {
			return err
		}
		return ok(c)
	})
	s.Echo.GET("/fast", ok)
	s.Echo.POST("/callback", ok)
	s.Exempt(http.MethodPost, "/callback")
	s.Admin().GET("/secret", ok)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	sat.url = "http://" + ln.Addr().String()
	return sat
}

// get sends method path with the admin token when auth is set. A request
// admitted where the test wants it shed would block in its handler: the
// client's timeout fails the test instead of hanging it.
func get(t *testing.T, method, url string, auth bool) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer tok")
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestAdmissionShedsAtOnceAndServesOperators fills every slot with blocked
// handlers and checks, while they stay blocked, that a business request is
// answered 503 OVERLOADED with Retry-After (so it did not wait for them),
// that health, readiness, metrics, admin and an exempt route still answer,
// that the shed requests are counted per route, and that a freed slot
// admits again.
func TestAdmissionShedsAtOnceAndServesOperators(t *testing.T) {
	const limit = 2
	sat := serveAdmission(t, limit)
	blocked := make(chan *http.Response, limit)
	for range limit {
		go func() {
			resp, err := http.Get(sat.url + "/slow") //nolint:bodyclose // closed by the receiver of blocked
			if err != nil {
				t.Error(err)
			}
			blocked <- resp
		}()
	}
	for range limit {
		<-sat.entered
	}

	tests := []struct {
		name           string
		method, path   string
		auth           bool
		wantStatus     int
		wantCode       string
		wantRetryAfter string
	}{
		{"business request", http.MethodGet, "/fast", false, http.StatusServiceUnavailable, httpapi.CodeOverloaded, "1"},
		{"another business request", http.MethodGet, "/fast", false, http.StatusServiceUnavailable, httpapi.CodeOverloaded, "1"},
		{"unknown route", http.MethodGet, "/nowhere", false, http.StatusServiceUnavailable, httpapi.CodeOverloaded, "1"},
		{"health", http.MethodGet, "/healthz", false, http.StatusOK, "", ""},
		{"readiness", http.MethodGet, "/readyz", false, http.StatusOK, "", ""},
		{"metrics", http.MethodGet, "/metrics", false, http.StatusOK, "", ""},
		{"admin", http.MethodGet, "/admin/secret", true, http.StatusOK, httpapi.CodeSuccess, ""},
		{"admin without its token", http.MethodGet, "/admin/secret", false, http.StatusUnauthorized, httpapi.CodeUnauthorized, ""},
		{"exempt route", http.MethodPost, "/callback", false, http.StatusOK, httpapi.CodeSuccess, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := get(t, tt.method, sat.url+tt.path, tt.auth)
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.wantStatus, raw)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.wantRetryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.wantRetryAfter)
			}
			if tt.wantCode == "" {
				return
			}
			var body httpapi.ErrorBody
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("answer is not JSON: %s", raw)
			}
			if body.BusinessCode != tt.wantCode {
				t.Errorf("businessCode %q, want %q", body.BusinessCode, tt.wantCode)
			}
			if resp.StatusCode >= 400 && body.Message == "" {
				t.Error("error answer without a message")
			}
		})
	}

	metrics := get(t, http.MethodGet, sat.url+"/metrics", false)
	raw, err := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`http_requests_shed_total{method="GET",route="/fast"} 2`,
		`http_requests_in_flight 2`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	sat.release <- struct{}{}
	first := <-blocked
	if first == nil {
		t.Fatal("a blocked request failed")
	}
	first.Body.Close()
	if first.StatusCode != http.StatusOK {
		t.Fatalf("released request: status %d", first.StatusCode)
	}
	resp := get(t, http.MethodGet, sat.url+"/fast", false)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with a slot free: status %d, want 200", resp.StatusCode)
	}
	close(sat.release)
	if last := <-blocked; last != nil {
		last.Body.Close()
	}
}

// TestFreedSlotGoesToWorkBegunFirst queues, behind the only slot, a
// request starting new work and then one continuing work begun, and checks
// that the freed slot goes to the second, then to the first: past the
// capacity a created order's checkout is served before another create.
func TestFreedSlotGoesToWorkBegunFirst(t *testing.T) {
	sat := serveQueue(t, httpapi.Admission{MaxInFlight: 1, QueueWait: 5 * time.Millisecond, QueueInterval: httpapi.MaxQueueWait})
	answers := make(chan int, 3)
	send := func(method, path string) {
		go func() {
			req, err := http.NewRequest(method, sat.url+path, nil)
			if err != nil {
				t.Error(err)
				answers <- 0
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				answers <- 0
				return
			}
			resp.Body.Close()
			answers <- resp.StatusCode
		}()
	}
	send(http.MethodGet, "/slow")
	if got := <-sat.entered; got != "/slow" {
		t.Fatalf("first admitted: %s", got)
	}
	send(http.MethodPost, "/start")
	waitMetric(t, sat, "http_requests_queued 1")
	send(http.MethodGet, "/slow")
	waitMetric(t, sat, "http_requests_queued 2")

	for _, want := range []string{"/slow", "/start"} {
		sat.release <- struct{}{}
		if got := <-sat.entered; got != want {
			t.Fatalf("the freed slot went to %s, want %s", got, want)
		}
	}
	close(sat.release)
	for range 3 {
		if got := <-answers; got != http.StatusOK {
			t.Fatalf("a queued request answered %d, want 200", got)
		}
	}
}

// TestQueueServesABurstAndShedsAStandingQueue checks CoDel's two regimes
// behind one slot: a request queued behind a short-lived holder is served
// though it waited past the target; while the holder stays, requests wait
// out the interval and are shed, and once the queue has stood above the
// target for an interval the service counts itself overloaded; a request
// finding the slot free ends that state.
func TestQueueServesABurstAndShedsAStandingQueue(t *testing.T) {
	const interval = 100 * time.Millisecond
	sat := serveQueue(t, httpapi.Admission{MaxInFlight: 1, QueueWait: time.Millisecond, QueueInterval: interval})
	status := func(path string) <-chan int {
		got := make(chan int, 1)
		go func() {
			resp, err := http.Get(sat.url + path)
			if err != nil {
				t.Error(err)
				got <- 0
				return
			}
			resp.Body.Close()
			got <- resp.StatusCode
		}()
		return got
	}

	holder := status("/slow")
	<-sat.entered
	burst := status("/fast")
	waitMetric(t, sat, "http_requests_queued 1")
	sat.release <- struct{}{}
	if got := <-holder; got != http.StatusOK {
		t.Fatalf("holder: %d", got)
	}
	if got := <-burst; got != http.StatusOK {
		t.Fatalf("a request queued behind a short holder answered %d, want it served", got)
	}

	holder = status("/slow")
	<-sat.entered
	for i := 0; !metricsHave(t, sat, "http_admission_overloaded 1"); i++ {
		if got := <-status("/fast"); got != http.StatusServiceUnavailable {
			t.Fatalf("a request behind a holder that stays answered %d, want 503", got)
		}
		if i == 10 {
			t.Fatal("ten requests shed after waiting out the interval, and the service is not overloaded")
		}
	}
	if got := <-status("/fast"); got != http.StatusServiceUnavailable {
		t.Fatalf("overloaded: answered %d, want 503", got)
	}
	sat.release <- struct{}{}
	if got := <-holder; got != http.StatusOK {
		t.Fatalf("holder: %d", got)
	}
	if got := <-status("/fast"); got != http.StatusOK {
		t.Fatalf("with the slot free: %d, want 200", got)
	}
	if !metricsHave(t, sat, "http_admission_overloaded 0") {
		t.Fatal("a request served at once did not end the overload")
	}
}

// metricsHave reports whether the server's /metrics has the line want.
func metricsHave(t *testing.T, sat *saturated, want string) bool {
	t.Helper()
	resp := get(t, http.MethodGet, sat.url+"/metrics", false)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(strings.Split(string(raw), "\n"), want)
}

// waitMetric waits until the server's /metrics has the line want.
func waitMetric(t *testing.T, sat *saturated, want string) {
	t.Helper()
	poll.Until(t, 5*time.Second, want, func() bool { return metricsHave(t, sat, want) })
}

// TestOutsideSlot holds the only slot's request in a call to another
// service and checks that the slot serves another request meanwhile; that
// the places outside are bounded (two per slot), so a third such call is
// shed; that a call returning while every slot is taken is shed, not
// served past the limit; and that one returning with a slot free is
// served.
func TestOutsideSlot(t *testing.T) {
	sat := serveAdmission(t, 1)
	status := func(path string) int {
		t.Helper()
		resp := get(t, http.MethodGet, sat.url+path, false)
		resp.Body.Close()
		return resp.StatusCode
	}
	background := func(path string) <-chan int {
		got := make(chan int, 1)
		go func() {
			resp, err := http.Get(sat.url + path)
			if err != nil {
				t.Error(err)
				got <- 0
				return
			}
			resp.Body.Close()
			got <- resp.StatusCode
		}()
		return got
	}

	first := background("/lookup")
	answerFirst := <-sat.outside
	if got := status("/fast"); got != http.StatusOK {
		t.Fatalf("a request while the only admitted one waits outside its slot: status %d, want 200", got)
	}
	second := background("/lookup")
	answerSecond := <-sat.outside
	if got := status("/lookup"); got != http.StatusServiceUnavailable {
		t.Fatalf("a third call while both places outside are taken: status %d, want 503", got)
	}
	slow := background("/slow")
	<-sat.entered
	close(answerFirst)
	if got := <-first; got != http.StatusServiceUnavailable {
		t.Fatalf("a call returning while the slot is taken: status %d, want 503", got)
	}
	sat.release <- struct{}{}
	if got := <-slow; got != http.StatusOK {
		t.Fatalf("the request that held the slot: status %d, want 200", got)
	}
	close(answerSecond)
	if got := <-second; got != http.StatusOK {
		t.Fatalf("a call returning with the slot free: status %d, want 200", got)
	}

	metrics := get(t, http.MethodGet, sat.url+"/metrics", false)
	raw, err := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := `http_requests_shed_total{method="GET",route="/lookup"} 2`; !strings.Contains(string(raw), want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

func TestAdmissionValidate(t *testing.T) {
	tests := []struct {
		name string
		a    httpapi.Admission
		want string // the variable the error names; empty: valid
	}{
		{"unbounded", httpapi.Admission{}, ""},
		{"defaults", httpapi.Admission{MaxInFlight: 40, QueueWait: httpapi.DefaultQueueWait, QueueInterval: httpapi.DefaultQueueInterval}, ""},
		{"interval unset", httpapi.Admission{MaxInFlight: 1, QueueWait: httpapi.DefaultQueueWait}, ""},
		{"interval under the wait", httpapi.Admission{MaxInFlight: 1, QueueWait: 50 * time.Millisecond, QueueInterval: 10 * time.Millisecond}, "HTTP_QUEUE_INTERVAL"},
		{"an interval of seconds", httpapi.Admission{MaxInFlight: 1, QueueWait: time.Millisecond, QueueInterval: 2 * time.Second}, "HTTP_QUEUE_INTERVAL"},
		{"negative limit", httpapi.Admission{MaxInFlight: -1}, "HTTP_MAX_IN_FLIGHT"},
		{"negative wait", httpapi.Admission{MaxInFlight: 1, QueueWait: -time.Millisecond}, "HTTP_QUEUE_WAIT"},
		{"a wait of seconds", httpapi.Admission{MaxInFlight: 1, QueueWait: 5 * time.Second}, "HTTP_QUEUE_WAIT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.a.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

func TestDefaultMaxInFlight(t *testing.T) {
	tests := []struct {
		name       string
		gomaxprocs int
		pool       int
		want       int
	}{
		{"the pool is the bound", 8, 2, 4},
		{"the cores are the bound", 2, 20, 16},
		{"both bound alike", 1, 4, 8},
		{"one core, one connection", 1, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := runtime.GOMAXPROCS(tt.gomaxprocs)
			t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
			if got := httpapi.DefaultMaxInFlight(tt.pool); got != tt.want {
				t.Errorf("DefaultMaxInFlight(%d) with GOMAXPROCS=%d = %d, want %d", tt.pool, tt.gomaxprocs, got, tt.want)
			}
		})
	}
}

// TestOverloadIsPerClass: the continuing requests a freed slot serves
// first wait little while the initiating ones behind them stand in a
// queue; each class keeps its own CoDel state, so their short waits do
// not keep the initiating requests waiting out the interval before each is
// shed, and the initiating requests' standing queue does not shorten the
// wait of the continuing ones.
func TestOverloadIsPerClass(t *testing.T) {
	const target, interval = 10 * time.Millisecond, 100 * time.Millisecond
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	q := httpapi.NewSlotQueue(1, target, interval, func() time.Time { return now })
	for _, step := range []struct {
		name           string
		advance        time.Duration
		class          httpapi.Class
		delay          time.Duration
		wantInitiating time.Duration
		wantContinuing time.Duration
	}{
		{"an initiating request waits past the target", 0, httpapi.Initiating, 50 * time.Millisecond, interval, interval},
		{"a continuing request is served at once", 40 * time.Millisecond, httpapi.Continuing, 0, interval, interval},
		{"initiating requests stay above the target for an interval", 70 * time.Millisecond, httpapi.Initiating, 100 * time.Millisecond, target, interval},
		{"continuing requests still served at once", 10 * time.Millisecond, httpapi.Continuing, time.Millisecond, target, interval},
		{"an initiating request served within the target ends its overload", 10 * time.Millisecond, httpapi.Initiating, 5 * time.Millisecond, interval, interval},
	} {
		now = now.Add(step.advance)
		q.Observe(step.class, step.delay)
		if got := q.MaxWait(httpapi.Initiating); got != step.wantInitiating {
			t.Errorf("%s: an initiating request may wait %s, want %s", step.name, got, step.wantInitiating)
		}
		if got := q.MaxWait(httpapi.Continuing); got != step.wantContinuing {
			t.Errorf("%s: a continuing request may wait %s, want %s", step.name, got, step.wantContinuing)
		}
	}
}

// TestWaitThatCannotBeMetIsShedAtOnce measures the pace at which freed
// slots go to each class (one every 15 s on the test's clock), then checks
// that a request finding so many of its class ahead of it that it could
// not get a slot within its wait (a minute) is shed at once, that one
// that can wait its turn is queued, whatever waits in the other class,
// and that a class's pace is its own.
func TestWaitThatCannotBeMetIsShedAtOnce(t *testing.T) {
	const gap = 15 * time.Second
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC).UnixNano())
	q := httpapi.NewSlotQueue(1, 10*time.Millisecond, time.Minute, func() time.Time { return time.Unix(0, clock.Load()) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acquire := func(c httpapi.Class) <-chan bool {
		got := make(chan bool, 1)
		go func() { got <- q.Acquire(ctx, c) }()
		return got
	}
	answer := func(name string, got <-chan bool) bool {
		t.Helper()
		select {
		case ok := <-got:
			return ok
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still waiting", name)
			return false
		}
	}
	queue := func(name string, c httpapi.Class) <-chan bool {
		t.Helper()
		want := q.Waiting() + 1
		got := acquire(c)
		poll.Until(t, 5*time.Second, name+" waiting", func() bool { return q.Waiting() == want })
		return got
	}

	if !answer("the free slot", acquire(httpapi.Continuing)) {
		t.Fatal("the free slot: shed")
	}
	// New orders wait three gaps, one after another, for the slot.
	var paced []<-chan bool
	for i := range 3 {
		paced = append(paced, queue(fmt.Sprint("paced new order ", i), httpapi.Initiating))
	}
	for i, got := range paced {
		clock.Add(int64(gap))
		q.Release()
		if !answer(fmt.Sprint("paced new order ", i), got) {
			t.Fatalf("paced new order %d: shed, want the slot released to it", i)
		}
	}

	// The slot is held. Four new orders wait, the fourth expecting its
	// slot after four gaps, exactly its minute; a fifth would wait five.
	for i := range 4 {
		queue(fmt.Sprint("new order ", i), httpapi.Initiating)
	}
	before := q.Waiting()
	if answer("a fifth new order", acquire(httpapi.Initiating)) {
		t.Fatal("a fifth new order: given a slot none freed")
	}
	if n := q.Waiting(); n != before {
		t.Fatalf("a fifth new order: %d waiting after it was shed, want the %d before it", n, before)
	}
	// Continuing requests have no measured pace: five queue behind the
	// held slot, ahead of the new orders.
	var steps []<-chan bool
	for i := range 5 {
		steps = append(steps, queue(fmt.Sprint("step of an order begun ", i), httpapi.Continuing))
	}
	q.Release()
	if !answer("the first step of an order begun", steps[0]) {
		t.Fatal("the first step of an order begun: shed, want the slot released to it before the new orders")
	}
}
