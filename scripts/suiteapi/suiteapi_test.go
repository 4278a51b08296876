package suiteapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// fakeService answers every request with status and body and records
// what it was asked.
type fakeService struct {
	status int
	body   string

	mu   sync.Mutex
	seen []*http.Request
	sent []string
}

func (f *fakeService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, r)
	f.sent = append(f.sent, string(raw))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, f.body)
}

func (f *fakeService) last(t *testing.T) (*http.Request, string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		t.Fatal("the service was not called")
	}
	return f.seen[len(f.seen)-1], f.sent[len(f.sent)-1]
}

func newClient(t *testing.T, f *fakeService) *suiteapi.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	urls := map[string]string{}
	for _, s := range []string{suiteapi.Order, suiteapi.Payment, suiteapi.Inventory, suiteapi.Points, suiteapi.Notification, suiteapi.Reconciliation} {
		urls[s] = srv.URL + "/"
	}
	c := suiteapi.New(suiteapi.Config{URLs: urls, AdminToken: "secret", PollInterval: time.Millisecond})
	t.Cleanup(c.Close)
	return c
}

func TestDoStatus(t *testing.T) {
	tests := []struct {
		name         string
		status       int
		body         string
		ok           []int
		wantErr      bool
		wantCode     string
		wantMessage  string
		wantDecoded  string
		wantReturned int
	}{
		{"2xx decoded", 200, `{"businessCode":"SUCCESS","status":"CREATED"}`, nil, false, "", "", "CREATED", 200},
		{"refusal carries the suite's error", 400, `{"businessCode":"INVALID_REQUEST","message":"quantity must be positive"}`, nil, true, "INVALID_REQUEST", "quantity must be positive", "", 400},
		{"an accepted status is not an error and not decoded", 500, `{"businessCode":"INTERNAL","status":"X"}`, []int{500}, false, "", "", "", 500},
		{"a body that is not the error shape", 503, `unavailable`, nil, true, "", "", "", 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, &fakeService{status: tt.status, body: tt.body})
			var out suiteapi.CommandResult
			code, err := c.Do(context.Background(), suiteapi.Order, "POST", "/orders", nil, map[string]string{"a": "b"}, &out, tt.ok...)
			if code != tt.wantReturned {
				t.Errorf("status = %d, want %d", code, tt.wantReturned)
			}
			if out.Status != tt.wantDecoded {
				t.Errorf("decoded status = %q, want %q", out.Status, tt.wantDecoded)
			}
			var se *suiteapi.StatusError
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *StatusError", err)
			}
			if se.Status != tt.status || se.BusinessCode != tt.wantCode || se.Message != tt.wantMessage {
				t.Errorf("StatusError = %+v, want %d %q %q", se, tt.status, tt.wantCode, tt.wantMessage)
			}
			if !suiteapi.IsStatus(err, tt.status) {
				t.Errorf("IsStatus(err, %d) = false", tt.status)
			}
		})
	}
}

func TestRequests(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		call      func(c *suiteapi.Client) error
		method    string
		path      string // with the query, as sent
		body      string
		withToken bool
		header    [2]string
	}{
		{"set stock", func(c *suiteapi.Client) error { return c.SetStock(ctx, "SKU 1", 7) },
			"PUT", "/inventory/SKU%201", `{"available":7}`, false, [2]string{}},
		{"create order", func(c *suiteapi.Client) error {
			_, err := c.CreateOrder(ctx, suiteapi.NewOrder{OrderID: "O-1", CustomerID: "C-1", Currency: "CNY",
				Items: []suiteapi.Item{{SKU: "S", Quantity: 2, UnitPrice: "1.50"}}})
			return err
		}, "POST", "/orders", `{"orderId":"O-1","customerId":"C-1","currency":"CNY","items":[{"sku":"S","quantity":2,"unitPrice":"1.50"}]}`, false, [2]string{}},
		{"pay", func(c *suiteapi.Client) error {
			_, err := c.Pay(ctx, suiteapi.PaymentRequest{OrderID: "O-1", Amount: "3.00", Currency: "CNY"})
			return err
		}, "POST", "/payments", `{"orderId":"O-1","amount":"3.00","currency":"CNY"}`, false, [2]string{}},
		{"notifications", func(c *suiteapi.Client) error { _, err := c.Notifications(ctx, "O 1"); return err },
			"GET", "/notifications?orderId=O+1", "", false, [2]string{}},
		{"dead letters of one status", func(c *suiteapi.Client) error {
			_, err := c.DeadLetters(ctx, suiteapi.Points, "O-1", "DEAD")
			return err
		},
			"GET", "/admin/dlq?aggregateId=O-1&status=DEAD", "", true, [2]string{}},
		{"fail consumer", func(c *suiteapi.Client) error { return c.FailConsumer(ctx, suiteapi.Inventory, 3) },
			"PUT", "/admin/failpoints/inventory.apply", `{"action":"error","times":3}`, true, [2]string{}},
		{"replay names who asks", func(c *suiteapi.Client) error { _, err := c.Replay(ctx, suiteapi.Points, 42, "ops"); return err },
			"POST", "/admin/dlq/42/replay", "", true, [2]string{"X-Operator", "ops"}},
		{"an order's traces", func(c *suiteapi.Client) error {
			_, err := c.Traces(ctx, suiteapi.Points, "4bf92f3577b34da6a3ce929d0e0e4736")
			return err
		}, "GET", "/admin/traces?traceId=4bf92f3577b34da6a3ce929d0e0e4736", "", true, [2]string{}},
		{"recent spans", func(c *suiteapi.Client) error { _, err := c.RecentSpans(ctx, suiteapi.Order, 50); return err },
			"GET", "/admin/traces?limit=50", "", true, [2]string{}},
		{"an order's outbox rows", func(c *suiteapi.Client) error { _, err := c.Outbox(ctx, suiteapi.Payment, "O 1"); return err },
			"GET", "/admin/outbox?aggregateId=O+1", "", true, [2]string{}},
		{"the outbox backlog", func(c *suiteapi.Client) error { _, err := c.Outbox(ctx, suiteapi.Order, ""); return err },
			"GET", "/admin/outbox", "", true, [2]string{}},
		{"lag", func(c *suiteapi.Client) error { _, err := c.Lag(ctx, suiteapi.Inventory); return err },
			"GET", "/admin/lag", "", true, [2]string{}},
		{"an order's findings", func(c *suiteapi.Client) error { _, err := c.Findings(ctx, "O-1"); return err },
			"GET", "/admin/reconciliation/findings?orderId=O-1", "", true, [2]string{}},
		{"replay with a key", func(c *suiteapi.Client) error {
			_, err := c.ReplayWithKey(ctx, suiteapi.Inventory, 7, "alice", "k-1")
			return err
		}, "POST", "/admin/dlq/7/replay", "", true, [2]string{"Idempotency-Key", "k-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeService{status: 200, body: `{"status":"SUCCEEDED"}`}
			if err := tt.call(newClient(t, f)); err != nil {
				t.Fatal(err)
			}
			req, body := f.last(t)
			if req.Method != tt.method || req.URL.RequestURI() != tt.path {
				t.Errorf("sent %s %s, want %s %s", req.Method, req.URL.RequestURI(), tt.method, tt.path)
			}
			if strings.TrimSpace(body) != tt.body {
				t.Errorf("body = %s, want %s", body, tt.body)
			}
			if got := req.Header.Get("Authorization") == "Bearer secret"; got != tt.withToken {
				t.Errorf("admin token sent: %v, want %v", got, tt.withToken)
			}
			if tt.header[0] != "" && req.Header.Get(tt.header[0]) != tt.header[1] {
				t.Errorf("%s = %q, want %q", tt.header[0], req.Header.Get(tt.header[0]), tt.header[1])
			}
		})
	}
}

// runService answers the reconciliation run API in turn: a start refused
// while another run runs, then accepted; the run RUNNING at the first
// look, then ended as final says.
type runService struct {
	final string
	mu    sync.Mutex
	posts []string // the Idempotency-Key of each start
	// starts are the X-Operator and the body of each start.
	starts []string
	gets   int
}

func (f *runService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/admin/reconciliation/runs":
		f.posts = append(f.posts, r.Header.Get("Idempotency-Key"))
		body, _ := io.ReadAll(r.Body)
		f.starts = append(f.starts, r.Header.Get("X-Operator")+" "+strings.TrimSpace(string(body)))
		if len(f.posts) == 1 {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"businessCode":"RUN_IN_PROGRESS","message":"run 6 is running"}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":7,"status":"RUNNING"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/admin/reconciliation/runs/7":
		f.gets++
		if f.gets == 1 {
			_, _ = io.WriteString(w, `{"id":7,"status":"RUNNING","checked":500}`)
			return
		}
		_, _ = io.WriteString(w, f.final)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"businessCode":"NOT_FOUND"}`)
	}
}

func runClient(t *testing.T, f *runService) *suiteapi.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c := suiteapi.New(suiteapi.Config{URLs: map[string]string{suiteapi.Reconciliation: srv.URL}, AdminToken: "secret", PollInterval: time.Millisecond})
	t.Cleanup(c.Close)
	return c
}

// TestReconcileWaitsForTheRun: a start refused while another run runs is
// sent again with the same key; the run started is followed until it
// ends, its progress reported on the way; one that failed is an error.
func TestReconcileWaitsForTheRun(t *testing.T) {
	tests := []struct {
		name, final string
		wantErr     string
	}{
		{"succeeded", `{"id":7,"status":"SUCCEEDED","checked":900,"findings":[{"orderId":"O-1","kind":"MISSING_EFFECT"}]}`, ""},
		{"failed", `{"id":7,"status":"FAILED","checked":500,"error":"payment unreachable"}`, "payment unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &runService{final: tt.final}
			var seen []int
			r, err := runClient(t, f).RunReconciliation(context.Background(), "drill", suiteapi.RunRequest{OrderIDs: []string{"O-1"}, MinAge: "0s"},
				func(r suiteapi.Run) { seen = append(seen, r.Checked) })
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if r.ID != 7 || r.Status == suiteapi.Running {
				t.Errorf("run = %+v, want run 7 as it ended", r)
			}
			if len(f.posts) != 2 || f.posts[0] == "" || f.posts[0] != f.posts[1] {
				t.Errorf("starts sent with keys %q, want two with one key", f.posts)
			}
			if want := `drill {"orderIds":["O-1"],"minAge":"0s"}`; f.starts[0] != want || f.starts[1] != want {
				t.Errorf("starts %q, want each %q", f.starts, want)
			}
			if len(seen) != 1 || seen[0] != 500 {
				t.Errorf("progress %v, want the running run's 500 orders once", seen)
			}
		})
	}
}

func TestPlaceOrder(t *testing.T) {
	tests := []struct {
		name, body string
		wantAmount string
		wantErr    bool
	}{
		{"pending payment", `{"businessCode":"SUCCESS","status":"PENDING_PAYMENT","amount":"3.00"}`, "3.00", false},
		{"refused", `{"businessCode":"OUT_OF_STOCK"}`, "", true},
		{"not pending", `{"businessCode":"SUCCESS","status":"CREATED","amount":"3.00"}`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, &fakeService{status: 200, body: tt.body})
			amount, err := c.PlaceOrder(context.Background(), suiteapi.NewOrder{OrderID: "O-1"})
			if (err != nil) != tt.wantErr || amount != tt.wantAmount {
				t.Errorf("PlaceOrder = %q, %v; want %q, error %v", amount, err, tt.wantAmount, tt.wantErr)
			}
		})
	}
}

func TestWaitFor(t *testing.T) {
	c := suiteapi.New(suiteapi.Config{PollInterval: time.Millisecond})
	calls := 0
	took, err := c.WaitFor(context.Background(), time.Second, "third call", func() (bool, error) {
		calls++
		return calls == 3, nil
	})
	if err != nil || calls != 3 || took <= 0 {
		t.Errorf("WaitFor = %v, %v after %d calls; want success on the third", took, err, calls)
	}

	_, err = c.WaitFor(context.Background(), 20*time.Millisecond, "never", func() (bool, error) {
		return false, errors.New("order service down")
	})
	if err == nil || !strings.Contains(err.Error(), "never: not within") || !strings.Contains(err.Error(), "order service down") {
		t.Errorf("err = %v, want the timeout with the last error", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.WaitFor(ctx, time.Minute, "cancelled", func() (bool, error) { return false, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestSumSamples(t *testing.T) {
	const exposition = `# HELP consumer_messages_total Messages handled, by outcome.
# TYPE consumer_messages_total counter
consumer_messages_total{consumer="inventory-service",outcome="ok"} 12
consumer_messages_total{consumer="inventory-service",outcome="error"} 3
# TYPE consumer_retries_total counter
consumer_retries_total{consumer="inventory-service"} 2
consumer_retries_total{consumer="points-service"} 5
# TYPE consumer_lag gauge
consumer_lag{partition="0"} 4
consumer_lag{partition="1"} 1
# TYPE relay_publish_seconds histogram
relay_publish_seconds_bucket{le="1"} 6
relay_publish_seconds_bucket{le="+Inf"} 9
relay_publish_seconds_sum 2.5
relay_publish_seconds_count 9
`
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"consumer_messages_total", map[string]string{"outcome": "ok"}, 12},
		{"consumer_messages_total", nil, 15},
		{"consumer_messages_total", map[string]string{"outcome": "rejected"}, 0},
		{"consumer_retries_total", nil, 7},
		{"consumer_retries_total", map[string]string{"consumer": "points-service"}, 5},
		{"consumer_lag", nil, 5},
		{"relay_publish_seconds", nil, 9},
		{"consumer_dead_letters_total", nil, 0},
	}
	for _, tt := range tests {
		got, err := suiteapi.SumSamples(strings.NewReader(exposition), tt.name, tt.labels)
		if err != nil || got != tt.want {
			t.Errorf("SumSamples(%s, %v) = %v, %v; want %v", tt.name, tt.labels, got, err, tt.want)
		}
	}
	if _, err := suiteapi.SumSamples(strings.NewReader("consumer_retries_total{a=\"b\"} many\n"), "consumer_retries_total", nil); err == nil {
		t.Error("a value that is not a number was accepted")
	}
}

// shedding answers 503 OVERLOADED, with retryAfter when it is not empty,
// to its first shed requests and 200 to the rest, recording each body.
type shedding struct {
	shed       int
	retryAfter string

	mu     sync.Mutex
	bodies []string
	keys   []string
}

func (s *shedding) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(raw))
	s.keys = append(s.keys, r.Header.Get(suiteapi.IdempotencyKeyHeader))
	n := len(s.bodies)
	s.mu.Unlock()
	if n <= s.shed {
		if s.retryAfter != "" {
			w.Header().Set("Retry-After", s.retryAfter)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"businessCode":"OVERLOADED","message":"at capacity"}`)
		return
	}
	_, _ = io.WriteString(w, `{"businessCode":"SUCCESS"}`)
}

func TestShedRequestsAreSentAgain(t *testing.T) {
	tests := []struct {
		name         string
		shed         int
		retryAfter   string
		retries      int
		wantStatus   int
		wantAttempts int
	}{
		{"shed twice, then served", 2, "0", 0, 200, 3},
		{"shed more than the retries", 10, "0", 3, 503, 4},
		{"a 503 without Retry-After is not sent again", 1, "", 0, 503, 1},
		{"retries off", 1, "0", -1, 503, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &shedding{shed: tt.shed, retryAfter: tt.retryAfter}
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)
			c := suiteapi.New(suiteapi.Config{URLs: map[string]string{suiteapi.Order: srv.URL}, ShedRetries: tt.retries})
			t.Cleanup(c.Close)
			code, _, err := c.Raw(context.Background(), suiteapi.Order, http.MethodPost, "/orders", nil, map[string]string{"orderId": "O-1"})
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantStatus {
				t.Errorf("status %d, want %d", code, tt.wantStatus)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.bodies) != tt.wantAttempts {
				t.Fatalf("%d attempts, want %d", len(s.bodies), tt.wantAttempts)
			}
			for i, b := range s.bodies {
				if b != `{"orderId":"O-1"}` {
					t.Errorf("attempt %d sent %q, want the same body every time", i+1, b)
				}
				// The retry of a command is the same command: the
				// service must see the same key, or it runs it twice.
				if s.keys[i] == "" || s.keys[i] != s.keys[0] {
					t.Errorf("attempt %d sent key %q, want the first attempt's %q", i+1, s.keys[i], s.keys[0])
				}
			}
		})
	}
}

// Each command gets a key of its own, a look-up none, and a key the caller
// gives is sent as it is.
func TestCommandsCarryAnIdempotencyKey(t *testing.T) {
	f := &fakeService{status: 200, body: `{}`}
	c := newClient(t, f)
	ctx := context.Background()
	key := func(method, path string, header http.Header) string {
		t.Helper()
		if _, _, err := c.Raw(ctx, suiteapi.Order, method, path, header, map[string]string{}); err != nil {
			t.Fatal(err)
		}
		r, _ := f.last(t)
		return r.Header.Get(suiteapi.IdempotencyKeyHeader)
	}
	first, second := key(http.MethodPost, "/orders", nil), key(http.MethodPost, "/orders", nil)
	if len(first) != 36 || len(second) != 36 || first == second {
		t.Fatalf("two commands sent keys %q and %q, want two fresh UUIDs", first, second)
	}
	if k := key(http.MethodPut, "/inventory/SKU-1", nil); k == "" {
		t.Error("PUT /inventory/{sku} sent no key")
	}
	if k := key(http.MethodPost, "/admin/dlq/1/replay", nil); k == "" {
		t.Error("a DLQ replay sent no key")
	}
	for _, look := range []struct{ method, path string }{{http.MethodGet, "/orders/O-1"}, {http.MethodPost, "/admin/reconciliation/orders"}} {
		if k := key(look.method, look.path, nil); k != "" {
			t.Errorf("%s %s sent key %q, want none", look.method, look.path, k)
		}
	}
	if k := key(http.MethodPost, "/orders", http.Header{suiteapi.IdempotencyKeyHeader: {"mine"}}); k != "mine" {
		t.Errorf("the caller's key became %q", k)
	}
}

// A refund sends the key it is given, or none at all; an answer marked
// Idempotent-Replayed says so.
func TestRefundKey(t *testing.T) {
	tests := []struct {
		name         string
		key          string
		replayed     string
		wantReplayed bool
	}{
		{"a key, first answer", "K-1", "", false},
		{"a key, answer given again", "K-1", "true", true},
		{"no key", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotKey []string
			var gotPath, gotBody string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				raw, _ := io.ReadAll(r.Body)
				gotKey, gotPath, gotBody = r.Header.Values(suiteapi.IdempotencyKeyHeader), r.URL.Path, string(raw)
				if tt.replayed != "" {
					w.Header().Set(suiteapi.ReplayedHeader, tt.replayed)
				}
				_, _ = io.WriteString(w, `{"businessCode":"SUCCESS","refundId":"R-1","amount":"30.00","status":"REFUNDING","version":4}`)
			}))
			t.Cleanup(srv.Close)
			c := suiteapi.New(suiteapi.Config{URLs: map[string]string{suiteapi.Order: srv.URL}})
			t.Cleanup(c.Close)
			a, err := c.Refund(context.Background(), "O-1", tt.key, suiteapi.Refund{Amount: "30.00",
				Items: []suiteapi.Line{{SKU: "SKU-1", Quantity: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			if tt.key == "" && len(gotKey) != 0 || tt.key != "" && (len(gotKey) != 1 || gotKey[0] != tt.key) {
				t.Errorf("sent keys %q, want %q", gotKey, tt.key)
			}
			if gotPath != "/orders/O-1/refunds" || gotBody != `{"amount":"30.00","items":[{"sku":"SKU-1","quantity":1}]}` {
				t.Errorf("sent %s %s", gotPath, gotBody)
			}
			if a.BusinessCode != "SUCCESS" || a.RefundID != "R-1" || suiteapi.AmountText(a.Amount) != "30.00" || a.Status != "REFUNDING" ||
				a.Version != 4 || a.Replayed != tt.wantReplayed {
				t.Errorf("answer %+v, want SUCCESS R-1 30.00 REFUNDING 4, replayed %v", a, tt.wantReplayed)
			}
		})
	}
}

// TestFailPointFired reads GET /admin/failpoints: a point that fired
// often enough passes, one that did not, one the service does not declare
// and a service without fail points are errors that say which.
func TestFailPointFired(t *testing.T) {
	const listing = `{"points":[{"name":"inventory.apply","action":"off","remaining":0,"hits":2},` +
		`{"name":"relay.before-publish","action":"error","remaining":-1,"hits":0}]}`
	tests := []struct {
		name, point string
		min         int
		status      int
		body        string
		// want is in the error; empty: no error.
		want string
	}{
		{"fired enough", "inventory.apply", 2, 200, listing, ""},
		{"fired too little", "inventory.apply", 3, 200, listing, "fired 2 times, want at least 3: the fault never happened"},
		{"armed but never reached", "relay.before-publish", 1, 200, listing, "fired 0 times"},
		{"not declared", "inventory.aply", 1, 200, listing, "does not declare fail point inventory.aply"},
		{"fail points off", "inventory.apply", 1, 404, `{"businessCode":"NOT_FOUND","message":"not found"}`, "FAILPOINTS_ENABLED=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeService{status: tt.status, body: tt.body}
			err := newClient(t, f).FailPointFired(context.Background(), suiteapi.Inventory, tt.point, tt.min)
			if req, _ := f.last(t); req.Method != "GET" || req.URL.Path != "/admin/failpoints" {
				t.Errorf("sent %s %s, want GET /admin/failpoints", req.Method, req.URL.Path)
			}
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestArmUnknownFailPoint: a 404 UNKNOWN_FAIL_POINT passes the service's
// message on, and is not taken for a service without fail points.
func TestArmUnknownFailPoint(t *testing.T) {
	f := &fakeService{status: 404, body: `{"businessCode":"UNKNOWN_FAIL_POINT","message":"fail point \"inventory.aply\": unknown fail point (known: consumer.after-commit, inventory.apply)"}`}
	err := newClient(t, f).ArmFailPoint(context.Background(), suiteapi.Inventory, "inventory.aply", "error", 1)
	var se *suiteapi.StatusError
	if !errors.As(err, &se) || se.BusinessCode != suiteapi.CodeUnknownFailPoint || !strings.Contains(err.Error(), "known: consumer.after-commit, inventory.apply") ||
		strings.Contains(err.Error(), "FAILPOINTS_ENABLED") {
		t.Fatalf("err = %v, want the UNKNOWN_FAIL_POINT answer with the known names", err)
	}
}
