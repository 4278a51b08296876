package admin_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/testkit/httpapitest"
)

// TestFailPointAnswers: a name the service does not declare is a 404
// UNKNOWN_FAIL_POINT naming the ones it does, an unknown action a 400, and
// GET /admin/failpoints shows every declared point with what it did.
func TestFailPointAnswers(t *testing.T) {
	fp, err := failpoint.New(failpoint.Config{Names: []string{"x.apply", "relay.before-publish"}, Spec: "relay.before-publish=error*3"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.New(httpapi.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	admin.RegisterFailPoints(srv.Admin(), fp)

	tests := []struct {
		name, path, body string
		status           int
		code             string
		// message is what the error message must contain.
		message string
	}{
		{"misspelt name", "/admin/failpoints/x.aply", `{"action":"error"}`, http.StatusNotFound, admin.CodeUnknownFailPoint,
			`"x.aply": unknown fail point (known: relay.before-publish, x.apply)`},
		{"disarming a misspelt name", "/admin/failpoints/relay.before-publsh", `{"action":"off"}`, http.StatusNotFound, admin.CodeUnknownFailPoint,
			"known: relay.before-publish, x.apply"},
		{"misspelt name and action", "/admin/failpoints/x.aply", `{"action":"crash"}`, http.StatusNotFound, admin.CodeUnknownFailPoint, "known:"},
		{"unknown action", "/admin/failpoints/x.apply", `{"action":"crash"}`, http.StatusBadRequest, httpapi.CodeInvalidRequest, `unknown action "crash"`},
		{"declared", "/admin/failpoints/x.apply", `{"action":"error","times":2}`, http.StatusOK, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httpapitest.Do(srv.Echo, http.MethodPut, tt.path, []byte(tt.body), nil)
			if rec.Code != tt.status {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tt.status)
			}
			if tt.code == "" {
				return
			}
			var body httpapi.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body.BusinessCode != tt.code || !strings.Contains(body.Message, tt.message) {
				t.Fatalf("%s %q, want %s containing %q", body.BusinessCode, body.Message, tt.code, tt.message)
			}
		})
	}

	for range 2 {
		_ = fp.Inject("relay.before-publish")
	}
	_ = fp.Inject("x.apply")
	rec := httpapitest.Do(srv.Echo, http.MethodGet, "/admin/failpoints", nil, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /admin/failpoints = %d %s", rec.Code, rec.Body)
	}
	var got admin.FailPoints
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := admin.FailPoints{Points: []failpoint.Point{
		{Name: "relay.before-publish", Action: "error", Remaining: 1, Hits: 2},
		{Name: "x.apply", Action: "error", Remaining: 1, Hits: 1},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GET /admin/failpoints = %+v, want %+v", got, want)
	}
}
