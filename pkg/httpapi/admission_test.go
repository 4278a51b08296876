package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/observability"
)

// saturated is a served server whose business routes are all taken by
// blocked handlers.
type saturated struct {
	url string
	// entered receives once per /slow request its handler runs.
	entered chan struct{}
	// release lets one blocked /slow handler answer.
	release chan struct{}
	// outside receives, once per /lookup request whose call to another
	// service runs outside its slot, the channel whose closing answers
	// that call.
	outside chan chan struct{}
}

// serveAdmission serves a server admitting limit business requests, with
// GET /slow blocking until released, POST /start blocking alike on a route
// that starts new work (Server.Initiating), GET /lookup blocking outside its
// slot (httpapi.OutsideSlot) until answered, GET /fast, an exempt POST
// /callback and an admin route behind the token "tok".
func serveAdmission(t *testing.T, limit int) *saturated {
	t.Helper()
	s := httpapi.New(httpapi.Config{
		AdminToken: "tok",
		Registry:   observability.NewRegistry(),
		Ready:      func(context.Context) error { return nil },
		Admission:  httpapi.Admission{MaxInFlight: limit, QueueWait: 5 * time.Millisecond},
	}, slog.New(slog.DiscardHandler))
	sat := &saturated{entered: make(chan struct{}, limit), release: make(chan struct{}),
		outside: make(chan chan struct{})}
	ok := func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"businessCode": httpapi.CodeSuccess})
	}
	blocking := func(c echo.Context) error {
		sat.entered <- struct{}{}
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

// TestInitiatingTakesHalfTheSlots fills half of four slots with requests
// starting new work and checks that a third such request is shed while
// two slots are free, that those slots still admit requests continuing
// work, and that a finished start admits a new one.
func TestInitiatingTakesHalfTheSlots(t *testing.T) {
	const limit = 4
	sat := serveAdmission(t, limit)
	answers := make(chan *http.Response, limit+1)
	// send sends a request that must be admitted, and returns once its
	// handler runs; one answered first (shed) fails the test.
	send := func(method, path string) {
		t.Helper()
		go func() {
			req, err := http.NewRequest(method, sat.url+path, nil)
			if err != nil {
				t.Error(err)
			}
			resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed by the receiver of answers
			if err != nil {
				t.Error(err)
			}
			answers <- resp
		}()
		select {
		case <-sat.entered:
		case resp := <-answers:
			if resp != nil {
				resp.Body.Close()
				t.Fatalf("%s %s answered %d, want it admitted", method, path, resp.StatusCode)
			}
			t.Fatalf("%s %s failed, want it admitted", method, path)
		}
	}
	status := func(method, path string) int {
		t.Helper()
		resp := get(t, method, sat.url+path, false)
		resp.Body.Close()
		return resp.StatusCode
	}
	send(http.MethodPost, "/start")
	send(http.MethodPost, "/start")
	if got := status(http.MethodPost, "/start"); got != http.StatusServiceUnavailable {
		t.Fatalf("a third start with two slots free: status %d, want 503", got)
	}
	send(http.MethodGet, "/slow")
	send(http.MethodGet, "/slow")
	if got := status(http.MethodGet, "/fast"); got != http.StatusServiceUnavailable {
		t.Fatalf("every slot taken: status %d, want 503", got)
	}
	for range 3 {
		sat.release <- struct{}{}
		if resp := <-answers; resp != nil {
			resp.Body.Close()
		}
	}
	send(http.MethodPost, "/start")
	close(sat.release)
	for range 2 {
		if resp := <-answers; resp == nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a blocked request was not served: %v", resp)
		} else {
			resp.Body.Close()
		}
	}
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
		{"defaults", httpapi.Admission{MaxInFlight: 40, QueueWait: httpapi.DefaultQueueWait}, ""},
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
		{"the cores are the bound", 2, 20, 4},
		{"both bound alike", 4, 4, 8},
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
