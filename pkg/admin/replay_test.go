package admin_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// Who asks for a replay (X-Operator) is required and kept in the audit:
// none is refused with OPERATOR_REQUIRED, and a control character in it
// as in every other free text, before the dead letter is looked up. What
// net/http lets through a header (a tab, a C1 control as its UTF-8 bytes)
// is what reaches the handler.
func TestReplayNeedsAnOperatorWithoutControlCharacters(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, dlq.Schema())
	srv := httpapi.New(httpapi.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	admin.RegisterReplay(srv.Admin(), dlq.NewStore(db), nil)
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	tests := []struct {
		by   string
		code int
	}{
		{"alice\tbob", http.StatusBadRequest},
		{"alice\u0085", http.StatusBadRequest},
		{"alice", http.StatusNotFound},
		{"", http.StatusBadRequest},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/admin/dlq/1/replay", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(admin.OperatorHeader, tt.by)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body httpapi.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tt.code || body.BusinessCode == "" || body.Message == "" {
			t.Errorf("requested by %q: %d %+v (%v), want %d with a businessCode", tt.by, resp.StatusCode, body, err, tt.code)
		}
	}
}
