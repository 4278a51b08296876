package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/idempotency"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// clock is a test's settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a server with the middleware in front of counting handlers.
type fixture struct {
	srv   *httpapi.Server
	db    *sqlx.DB
	store *idempotency.Store
	clock *clock
	// runs counts the handlers' runs by path.
	runs sync.Map
	// fail makes POST /fail answer 500 while set.
	fail atomic.Bool
	// entered and release hold POST /slow: it says it entered, then waits.
	entered, release chan struct{}
}

const ttl = time.Hour

func newFixture(t *testing.T, admission httpapi.Admission) *fixture {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, idempotency.Schema())
	f := &fixture{db: db, clock: &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		entered: make(chan struct{}, 1), release: make(chan struct{})}
	f.store = idempotency.NewStore(db, idempotency.Config{TTL: ttl, LockTimeout: time.Minute, Now: f.clock.Now})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.srv = httpapi.New(httpapi.Config{Admission: admission}, logger)
	f.srv.Echo.Use(f.store.Middleware(logger, nil, nil))
	count := func(c echo.Context) int64 {
		v, _ := f.runs.LoadOrStore(c.Request().URL.Path, new(atomic.Int64))
		return v.(*atomic.Int64).Add(1)
	}
	f.srv.Echo.POST("/things/:id", func(c echo.Context) error {
		var body map[string]any
		if err := httpapi.Bind(c, &body); err != nil {
			return err
		}
		n := count(c)
		if body["reject"] == true {
			return &httpapi.Error{Status: http.StatusBadRequest, BusinessCode: "THING_REJECTED", Message: "no"}
		}
		id, derived := idempotency.DerivedID(c.Request().Context(), "T-")
		return c.JSON(http.StatusCreated, map[string]any{"run": n, "id": id, "derived": derived})
	})
	f.srv.Echo.PUT("/things/:id", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]any{"run": count(c)})
	})
	f.srv.Echo.POST("/fail", func(c echo.Context) error {
		n := count(c)
		if f.fail.Load() {
			return errors.New("the database went away")
		}
		return c.JSON(http.StatusOK, map[string]any{"run": n})
	})
	f.srv.Echo.POST("/slow", func(c echo.Context) error {
		n := count(c)
		f.entered <- struct{}{}
		<-f.release
		return c.JSON(http.StatusOK, map[string]any{"run": n})
	})
	return f
}

func (f *fixture) runsOf(path string) int64 {
	v, ok := f.runs.Load(path)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

type answer struct {
	status   int
	body     string
	replayed string
	code     string
}

func (f *fixture) send(method, path, body string, keys ...string) answer {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for _, k := range keys {
		req.Header.Add(idempotency.Header, k)
	}
	rec := httptest.NewRecorder()
	f.srv.Echo.ServeHTTP(rec, req)
	var e httpapi.ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &e)
	return answer{status: rec.Code, body: rec.Body.String(), replayed: rec.Header().Get(idempotency.ReplayedHeader), code: e.BusinessCode}
}

func TestKeyedRequests(t *testing.T) {
	f := newFixture(t, httpapi.Admission{})
	tests := []struct {
		name string
		// steps are sent in order; each wants a status, a business code
		// and whether it is a replay of the first.
		steps []step
		path  string
		runs  int64
	}{
		{"same key and body: the first answer again, marked, nothing run", []step{
			{"POST", "/things/a", `{"n":1}`, []string{"k-1"}, http.StatusCreated, "", false},
			{"POST", "/things/a", `{"n":1}`, []string{"k-1"}, http.StatusCreated, "", true},
			{"POST", "/things/a", `{"n":1}`, []string{`"k-1"`}, http.StatusCreated, "", true},
		}, "/things/a", 1},
		{"same key, another body: 422", []step{
			{"POST", "/things/b", `{"n":1}`, []string{"k-2"}, http.StatusCreated, "", false},
			{"POST", "/things/b", `{"n":2}`, []string{"k-2"}, http.StatusUnprocessableEntity, idempotency.CodeKeyReused, false},
		}, "/things/b", 1},
		{"same key, same route, another path: 422", []step{
			{"POST", "/things/c", `{}`, []string{"k-3"}, http.StatusCreated, "", false},
			{"POST", "/things/c2", `{}`, []string{"k-3"}, http.StatusUnprocessableEntity, idempotency.CodeKeyReused, false},
		}, "/things/c", 1},
		{"same key on another route or method is another key", []step{
			{"POST", "/things/d", `{}`, []string{"k-4"}, http.StatusCreated, "", false},
			{"PUT", "/things/d", `{}`, []string{"k-4"}, http.StatusOK, "", false},
		}, "/things/d", 2},
		{"no key: every request runs", []step{
			{"POST", "/things/e", `{"n":1}`, nil, http.StatusCreated, "", false},
			{"POST", "/things/e", `{"n":1}`, nil, http.StatusCreated, "", false},
		}, "/things/e", 2},
		{"a business rejection is kept", []step{
			{"POST", "/things/f", `{"reject":true}`, []string{"k-5"}, http.StatusBadRequest, "THING_REJECTED", false},
			{"POST", "/things/f", `{"reject":true}`, []string{"k-5"}, http.StatusBadRequest, "THING_REJECTED", true},
		}, "/things/f", 1},
		{"empty key: 400", []step{{"POST", "/things/g", `{}`, []string{""}, http.StatusBadRequest, idempotency.CodeKeyInvalid, false}}, "/things/g", 0},
		{"empty quoted key: 400", []step{{"POST", "/things/g", `{}`, []string{`""`}, http.StatusBadRequest, idempotency.CodeKeyInvalid, false}}, "/things/g", 0},
		{"key too long: 400", []step{{"POST", "/things/g", `{}`, []string{strings.Repeat("k", 256)}, http.StatusBadRequest, idempotency.CodeKeyInvalid, false}}, "/things/g", 0},
		{"control character: 400", []step{{"POST", "/things/g", `{}`, []string{"k\x01"}, http.StatusBadRequest, idempotency.CodeKeyInvalid, false}}, "/things/g", 0},
		{"not ASCII: 400", []step{{"POST", "/things/g", `{}`, []string{"klé"}, http.StatusBadRequest, idempotency.CodeKeyInvalid, false}}, "/things/g", 0},
		{"two keys: 400", []step{{"POST", "/things/g", `{}`, []string{"k-6", "k-7"}, http.StatusBadRequest, idempotency.CodeKeyInvalid, false}}, "/things/g", 0},
		{"the longest key is fine", []step{
			{"POST", "/things/h", `{}`, []string{strings.Repeat("k", 255)}, http.StatusCreated, "", false},
			{"POST", "/things/h", `{}`, []string{strings.Repeat("k", 255)}, http.StatusCreated, "", true},
		}, "/things/h", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first answer
			for i, s := range tt.steps {
				got := f.send(s.method, s.path, s.body, s.keys...)
				if got.status != s.status || got.code != s.code {
					t.Fatalf("step %d: %d %s, want %d %q", i, got.status, got.body, s.status, s.code)
				}
				if (got.replayed == "true") != s.replayed {
					t.Fatalf("step %d: %s %q, want replayed %v", i, idempotency.ReplayedHeader, got.replayed, s.replayed)
				}
				if i == 0 {
					first = got
				} else if s.replayed && got.body != first.body {
					t.Fatalf("step %d: replay %s, want the first answer %s", i, got.body, first.body)
				}
			}
			if n := f.runsOf(tt.path); n != tt.runs {
				t.Fatalf("%s ran %d times, want %d", tt.path, n, tt.runs)
			}
		})
	}
}

type step struct {
	method, path, body string
	keys               []string
	status             int
	code               string
	replayed           bool
}

// The handler sees an id derived from the key and the request: the same
// for a retry, another for another key.
func TestDerivedIDFollowsTheKeyAndTheRequest(t *testing.T) {
	f := newFixture(t, httpapi.Admission{})
	id := func(key, body string) string {
		var out struct {
			ID      string `json:"id"`
			Derived bool   `json:"derived"`
		}
		got := f.send("POST", "/things/x", body, key)
		if err := json.Unmarshal([]byte(got.body), &out); err != nil || !out.Derived || !strings.HasPrefix(out.ID, "T-") {
			t.Fatalf("%s: %v %+v", got.body, err, out)
		}
		return out.ID
	}
	a := id("d-1", `{}`)
	f.clock.Advance(ttl + time.Second) // expired: the same key runs again
	if again := id("d-1", `{}`); again != a {
		t.Fatalf("the same key and request derived %s, then %s", a, again)
	}
	if other := id("d-2", `{}`); other == a {
		t.Fatalf("another key derived the same id %s", a)
	}
}

// A second request while the first still runs is a 409; once the first
// answered, its answer is replayed.
func TestSecondRequestWhileTheFirstRunsIsInUse(t *testing.T) {
	f := newFixture(t, httpapi.Admission{})
	firstDone := make(chan answer)
	go func() { firstDone <- f.send("POST", "/slow", `{}`, "k-slow") }()
	<-f.entered
	secondDone := make(chan answer)
	go func() { secondDone <- f.send("POST", "/slow", `{}`, "k-slow") }()
	select {
	case got := <-secondDone:
		if got.status != http.StatusConflict || got.code != idempotency.CodeKeyInUse {
			t.Errorf("second while running: %d %s", got.status, got.body)
		}
	case <-f.entered:
		close(f.release)
		<-firstDone
		<-secondDone
		t.Fatal("the second request ran while the first was running")
	}
	close(f.release)
	first := <-firstDone
	if first.status != http.StatusOK || first.replayed != "" {
		t.Fatalf("first: %+v", first)
	}
	if got := f.send("POST", "/slow", `{}`, "k-slow"); got.status != http.StatusOK || got.replayed != "true" || got.body != first.body {
		t.Fatalf("after the first: %+v, want a replay of %s", got, first.body)
	}
	if n := f.runsOf("/slow"); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

// A 5xx is not kept: the retry with the key runs the request, and its
// answer is kept.
func TestServerErrorsAreNotKept(t *testing.T) {
	f := newFixture(t, httpapi.Admission{})
	f.fail.Store(true)
	if got := f.send("POST", "/fail", `{}`, "k-fail"); got.status != http.StatusInternalServerError {
		t.Fatalf("first: %+v", got)
	}
	f.fail.Store(false)
	second := f.send("POST", "/fail", `{}`, "k-fail")
	if second.status != http.StatusOK || second.replayed != "" {
		t.Fatalf("retry after a 500: %+v, want a run", second)
	}
	if got := f.send("POST", "/fail", `{}`, "k-fail"); got.replayed != "true" || got.body != second.body {
		t.Fatalf("third: %+v", got)
	}
	if n := f.runsOf("/fail"); n != 2 {
		t.Fatalf("ran %d times, want 2", n)
	}
}

// A request shed at admission consumes no key: its retry runs.
func TestShedRequestConsumesNoKey(t *testing.T) {
	f := newFixture(t, httpapi.Admission{MaxInFlight: 1})
	firstDone := make(chan answer)
	go func() { firstDone <- f.send("POST", "/slow", `{}`, "k-hold") }()
	<-f.entered
	if got := f.send("POST", "/things/s", `{}`, "k-shed"); got.status != http.StatusServiceUnavailable || got.code != httpapi.CodeOverloaded {
		t.Fatalf("while full: %+v", got)
	}
	close(f.release)
	<-firstDone
	if got := f.send("POST", "/things/s", `{}`, "k-shed"); got.status != http.StatusCreated || got.replayed != "" {
		t.Fatalf("retry after shedding: %+v", got)
	}
}

// A key older than the window is swept; the same key then runs afresh.
func TestExpiredKeysAreSwept(t *testing.T) {
	f := newFixture(t, httpapi.Admission{})
	f.send("POST", "/things/old", `{}`, "k-old")
	f.clock.Advance(ttl / 2)
	f.send("POST", "/things/young", `{}`, "k-young")
	if n, err := f.store.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("sweep inside the window: %d %v", n, err)
	}
	f.clock.Advance(ttl / 2)
	if n, err := f.store.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep past the first key's window: %d %v, want 1", n, err)
	}
	var left []string
	if err := f.db.Select(&left, `SELECT idempotency_key FROM idempotency_keys`); err != nil || len(left) != 1 || left[0] != "k-young" {
		t.Fatalf("left %v %v", left, err)
	}
	if got := f.send("POST", "/things/old", `{}`, "k-old"); got.replayed != "" || f.runsOf("/things/old") != 2 {
		t.Fatalf("the swept key: %+v, runs %d", got, f.runsOf("/things/old"))
	}
}

// The sweeper sweeps until its context ends, then returns.
func TestSweeperStopsWithItsContext(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, idempotency.Schema())
	c := &clock{now: time.Now()}
	store := idempotency.NewStore(db, idempotency.Config{TTL: ttl, SweepInterval: time.Millisecond, Now: c.Now})
	ctx := context.Background()
	if claim, err := store.Claim(ctx, idempotency.Request{Scope: "POST /x", Key: "k", Fingerprint: "f"}); err != nil || claim.Verdict != idempotency.Run {
		t.Fatalf("claim: %+v %v", claim, err)
	}
	c.Advance(ttl)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- store.RunSweeper(ctx, func(err error) { t.Error(err) }) }()
	poll.Until(t, 10*time.Second, "the expired key swept", func() bool {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM idempotency_keys`); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A key left running by a run that died is refused with 409 until its lock
// times out; then a retry runs the request.
func TestAbandonedKeyIsTakenOverAfterItsLock(t *testing.T) {
	f := newFixture(t, httpapi.Admission{})
	body := []byte(`{}`)
	r := idempotency.Request{Scope: "POST /things/:id", Key: "k-dead", Fingerprint: idempotency.Fingerprint("POST", "/things/z", body)}
	if claim, err := f.store.Claim(context.Background(), r); err != nil || claim.Verdict != idempotency.Run {
		t.Fatalf("claim: %+v %v", claim, err)
	}
	// The process died here: no answer, no release.
	if got := f.send("POST", "/things/z", string(body), "k-dead"); got.status != http.StatusConflict {
		t.Fatalf("inside the lock: %+v", got)
	}
	f.clock.Advance(time.Minute)
	got := f.send("POST", "/things/z", string(body), "k-dead")
	if got.status != http.StatusCreated || got.replayed != "" || f.runsOf("/things/z") != 1 {
		t.Fatalf("after the lock: %+v, runs %d", got, f.runsOf("/things/z"))
	}
	if again := f.send("POST", "/things/z", string(body), "k-dead"); again.replayed != "true" || again.body != got.body {
		t.Fatalf("then: %+v", again)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		ttl time.Duration
		ok  bool
	}{{idempotency.DefaultTTL, true}, {idempotency.MinTTL, true}, {idempotency.MaxTTL, true},
		{time.Minute, false}, {0, true}, {-time.Hour, false}, {idempotency.MaxTTL + time.Hour, false}} {
		err := idempotency.Config{TTL: tt.ttl}.Validate()
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), "IDEMPOTENCY_KEY_TTL")) {
			t.Errorf("TTL %s: %v", tt.ttl, err)
		}
	}
}
