package admin_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/testkit/httpapitest"
)

// FuzzBindOrderIDs sends any body to a route that decodes it with
// BindOrderIDs, the body of every service's POST
// /admin/reconciliation/orders: a body it accepts holds 1 to MaxOrderIDs
// valid ids, anything else is a 4xx with a JSON businessCode, never a 5xx.
func FuzzBindOrderIDs(f *testing.F) {
	f.Add([]byte(`{"orderIds":["O-1","O-2"]}`))
	f.Add([]byte(`{"orderIds":[]}`))
	f.Add([]byte(`{"orderIds":["O 1"]}`))
	f.Add([]byte(`{"orderIds":"O-1"}`))
	f.Add([]byte(`{"orderIds":[null,1]}`))
	f.Add([]byte(`{"ORDERIDS":["O-1"]}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`{"orderIds":["O-1\u0000"]}`))
	f.Add([]byte(`{"orderIds":["O-1\n","\u0085"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		srv := httpapi.New(httpapi.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		var got []string
		srv.Echo.POST("/ids", func(c echo.Context) error {
			ids, err := admin.BindOrderIDs(c)
			if err != nil {
				return err
			}
			got = ids
			return c.JSON(http.StatusOK, map[string]int{"count": len(ids)})
		})
		rec := httpapitest.Do(srv.Echo, http.MethodPost, "/ids", body, nil)
		httpapitest.CheckAnswer(t, rec, false)
		if rec.Code != http.StatusOK {
			return
		}
		if len(got) < 1 || len(got) > admin.MaxOrderIDs {
			t.Fatalf("accepted %d ids from %s", len(got), body)
		}
		for _, id := range got {
			if rec := httpapitest.Do(srv.Echo, http.MethodPost, "/ids", []byte(`{"orderIds":[`+quote(id)+`]}`), nil); rec.Code != http.StatusOK {
				t.Fatalf("accepted %q among %s, but not alone: %d %s", id, body, rec.Code, rec.Body)
			}
		}
	})
}

func quote(s string) string {
	return `"` + s + `"` // the ids accepted are letters, digits and - _ . : only
}

// FuzzFailPoints sends any body and fail point name to PUT
// /admin/failpoints/{name}: a 2xx or a 4xx with a JSON businessCode.
func FuzzFailPoints(f *testing.F) {
	f.Add("order.after-commit", []byte(`{"action":"error","times":2}`))
	f.Add("x", []byte(`{"action":"crash"}`))
	f.Add("x", []byte(`{"action":"off","times":-1}`))
	f.Add("", []byte(`{"action":"panic"}`))
	f.Add("x", []byte(`{"action":1}`))
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		fp, err := failpoint.New(failpoint.Config{Names: []string{"order.after-commit", "x"}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httpapi.New(httpapi.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		admin.RegisterFailPoints(srv.Admin(), fp)
		rec := httpapitest.Do(srv.Echo, http.MethodPut, "/admin/failpoints/"+url.PathEscape(name), body, nil)
		httpapitest.CheckAnswer(t, rec, false)
	})
}
