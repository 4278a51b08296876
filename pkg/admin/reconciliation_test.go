package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
)

func ids(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"O-%d"`, i)
	}
	return `{"orderIds":[` + strings.Join(parts, ",") + `]}`
}

func TestBindOrderIDs(t *testing.T) {
	srv := httpapi.New(httpapi.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.Echo.POST("/ids", func(c echo.Context) error {
		got, err := admin.BindOrderIDs(c)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, got)
	})
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)

	tests := []struct {
		name string
		body string
		// wantIDs is the number of ids answered, for a valid request.
		wantIDs int
		// wantField is what a 400's message starts with.
		wantField string
	}{
		{name: "one id", body: `{"orderIds":["O-1"]}`, wantIDs: 1},
		{name: "the most ids", body: ids(admin.MaxOrderIDs), wantIDs: admin.MaxOrderIDs},
		{name: "repeated ids are each answered", body: `{"orderIds":["O-1","O-1"]}`, wantIDs: 2},
		{name: "no ids", body: `{"orderIds":[]}`, wantField: "orderIds must hold 1 to 1000"},
		{name: "no field", body: `{}`, wantField: "orderIds must hold 1 to 1000"},
		{name: "one id too many", body: ids(admin.MaxOrderIDs + 1), wantField: "orderIds must hold 1 to 1000 order ids, got 1001"},
		{name: "an id with a space", body: `{"orderIds":["O-1","O 2"]}`, wantField: "orderIds[1] must be 1 to 128"},
		{name: "an empty id", body: `{"orderIds":[""]}`, wantField: "orderIds[0] is required"},
		{name: "an id too long", body: `{"orderIds":["` + strings.Repeat("x", 129) + `"]}`, wantField: "orderIds[0] must be 1 to 128"},
		{name: "malformed JSON", body: `{"orderIds":["O-1"`, wantField: "malformed JSON body"},
		{name: "ids that are not strings", body: `{"orderIds":[1,2]}`, wantField: "malformed JSON body"},
		// A misspelt field must not become a request over no order.
		{name: "a misspelt field", body: `{"orderId":["O-1"]}`, wantField: `malformed JSON body: json: unknown field "orderId"`},
		{name: "a second object", body: `{"orderIds":["O-1"]}{"orderIds":["O-2"]}`, wantField: "malformed JSON body: data after the JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(ts.URL+"/ids", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if tt.wantField == "" {
				var got []string
				if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &got) != nil || len(got) != tt.wantIDs {
					t.Fatalf("%d %s, want 200 with %d ids", resp.StatusCode, raw, tt.wantIDs)
				}
				return
			}
			var body httpapi.ErrorBody
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || body.BusinessCode != httpapi.CodeInvalidRequest ||
				!strings.HasPrefix(body.Message, tt.wantField) {
				t.Fatalf("%d %s, want 400 INVALID_REQUEST starting %q", resp.StatusCode, raw, tt.wantField)
			}
		})
	}
}

// Arming a fail point takes exactly the fields it knows.
func TestFailPointRequests(t *testing.T) {
	srv := httpapi.New(httpapi.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	fp, err := failpoint.New(failpoint.Config{Names: []string{"x.apply"}})
	if err != nil {
		t.Fatal(err)
	}
	admin.RegisterFailPoints(srv.Admin(), fp)
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	tests := []struct {
		name, body string
		status     int
		armed      bool
	}{
		{"arm", `{"action":"error","times":1}`, http.StatusOK, true},
		{"unknown field", `{"action":"error","tiems":1}`, http.StatusBadRequest, false},
		{"trailing bytes", `{"action":"error"} {"action":"off"}`, http.StatusBadRequest, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := fp.Set("x.apply", "off", 0); err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequest(http.MethodPut, ts.URL+"/admin/failpoints/x.apply", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, raw, tt.status)
			}
			if armed := fp.Inject("x.apply") != nil; armed != tt.armed {
				t.Fatalf("armed = %v, want %v", armed, tt.armed)
			}
		})
	}
}

// TestEffects: the query is read the same in every service, and a full
// page names where the next one starts.
func TestEffects(t *testing.T) {
	held := []string{"O-1", "O-2", "O-3"}
	var asked admin.EffectsPage
	srv := httpapi.New(httpapi.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	admin.RegisterEffects(srv.Admin(), effectsFunc(func(page admin.EffectsPage) []string {
		asked = page
		var out []string
		for _, id := range held {
			if id > page.After && len(out) < page.Limit {
				out = append(out, id)
			}
		}
		return out
	}))
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	tests := []struct {
		name, query string
		status      int
		want        string
	}{
		{"a full page", "before=2026-12-01T10:00:00Z&limit=2", 200, `{"orderIds":["O-1","O-2"],"next":"O-2"}`},
		{"the last page", "before=2026-12-01T10:00:00Z&limit=2&after=O-2", 200, `{"orderIds":["O-3"],"next":""}`},
		{"nothing after", "before=2026-12-01T10:00:00.5Z&after=O-3", 200, `{"orderIds":[],"next":""}`},
		{"no before", "limit=2", 400, `"message":"before must be a time`},
		{"a bad limit", "before=2026-12-01T10:00:00Z&limit=1001", 400, `"message":"limit must be a whole number from 1 to 1000`},
		{"a bad after", "before=2026-12-01T10:00:00Z&after=O%201", 400, `"message":"after must be`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get(ts.URL + "/admin/reconciliation/effects?" + tt.query)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || !strings.Contains(string(raw), tt.want) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, raw, tt.status, tt.want)
			}
		})
	}
	if want := time.Date(2026, 12, 1, 10, 0, 0, 5e8, time.UTC); !asked.Before.Equal(want) || asked.Limit != admin.MaxOrderIDs {
		t.Fatalf("asked %+v, want before %v and the default limit", asked, want)
	}
}

// effectsFunc lists effects with a function of the page asked for.
type effectsFunc func(admin.EffectsPage) []string

func (f effectsFunc) EffectOrders(_ context.Context, after string, before time.Time, limit int) ([]string, error) {
	return f(admin.EffectsPage{After: after, Before: before, Limit: limit}), nil
}
