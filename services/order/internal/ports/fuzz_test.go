package ports_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/testkit/httpapitest"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/internal/app/apptest"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
	"github.com/reliable-orders/fulfillment/services/order/internal/ports"
)

type noPeers struct{}

func (noPeers) View(context.Context, string) app.PeerView { return app.PeerView{} }

// fuzzServer is the order API over an in-memory store holding O-NEW
// (CREATED) and O-PAID (paid 80.00 CNY for two SKU-1 at 40.00).
func fuzzServer(tb testing.TB) http.Handler {
	tb.Helper()
	// A change's events must make valid envelopes, as the repository's
	// writing them to the outbox asks, so an input the handlers let
	// through to a broken event fails the fuzz target with a 500.
	store := apptest.NewStore(func(o *order.Order, events []order.Event) error {
		for _, e := range events {
			if _, err := adapters.Envelope(o, e, ""); err != nil {
				return fmt.Errorf("event %s of order %s: %w", e.Type, o.ID, err)
			}
		}
		return nil
	})
	items := []order.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: decimal.RequireFromString("40.00")}}
	for _, id := range []string{"O-NEW", "O-PAID"} {
		o, err := order.New(id, "C-1", "CNY", items)
		if err != nil {
			tb.Fatal(err)
		}
		if id == "O-PAID" {
			if _, err := o.Checkout(); err != nil {
				tb.Fatal(err)
			}
			if _, err := o.ApplyCallback(order.Callback{ID: "E-pay", Type: rules.CallbackPaymentSucceeded, OrderID: "O-PAID",
				PaymentID: "P-1", Amount: decimal.RequireFromString("80.00"), Currency: "CNY"}); err != nil {
				tb.Fatal(err)
			}
		}
		store.Put(o)
	}
	srv := httpapi.New(httpapi.Config{AdminToken: adminToken, MapError: ports.MapError}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ports.NewHandler(app.NewOrders(store, noPeers{}), ports.CallbackKeys{Secrets: [][]byte{[]byte(secret)}, Window: 5 * time.Minute}, nil).Register(srv, srv.Admin())
	return srv.Echo
}

// FuzzRequests sends any body to each JSON endpoint of the order API (the
// signed payment callback aside: its signature check comes first) and any
// order id in the path: the answer is always a 2xx or a 4xx with a JSON
// businessCode, never a 5xx or a panic.
func FuzzRequests(f *testing.F) {
	seeds := []struct {
		route uint8
		id    string
		body  string
	}{
		{0, "", orderBody},
		{0, "", `{"customerId":"C-1","currency":"CNY","items":[{"sku":"SKU-1","quantity":1,"unitPrice":"9999999999999999.99"},{"sku":"SKU-2","quantity":1000000,"unitPrice":"9999999999999999.99"}]}`},
		{0, "", `{"orderId":"O-NEW","customerId":"C-1","currency":"CNY","items":[{"sku":"SKU-1","quantity":2,"unitPrice":"40.00"}]}`},
		{0, "", `{"customerId":"C-1","currency":"CNY","items":[{"sku":"SKU-1","quantity":1,"unitPrice":80}]}`},
		{0, "", `{"items":[]}`},
		{1, "O-PAID", `{"amount":"10.00"}`},
		{1, "O-PAID", `{"items":[{"sku":"SKU-1","quantity":1}]}`},
		{1, "O-PAID", `{"amount":"80.01","items":[{"sku":"SKU-1","quantity":3}]}`},
		{1, "O-NEW", `{"amount":"1"}`},
		{2, "O-NEW", `{"reason":"CHANGED_MIND"}`},
		{2, "O-PAID", ``},
		{2, "O-NEW", `{"reason":"a\u0000b"}`},
		{2, "O-NEW", `{"reason":"two\nlines\t\u001f\u007f\u0080\u009f"}`},
		{3, "O-NEW", ``},
		{4, "", `{"orderIds":["O-NEW","O-PAID","O-MISSING"]}`},
		{4, "", `{"orderIds":[]}`},
		{0, "", `{"customerId":"C-1","currency":"CNY","items":null}`},
		{1, "O/..%2F", `[`},
		{5, "O-PAID", `{"atLeast":7}`},
		{5, "O-PAID", `{"atLeast":-1}`},
		{5, "O-PAID", `{"atLeast":9007199254740992}`},
		{5, "O-PAID", `{"atLeast":"7"}`},
		{5, "O-MISSING", `{"atLeast":7}`},
	}
	for _, s := range seeds {
		f.Add(s.route, s.id, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, route uint8, id string, body []byte) {
		h := fuzzServer(t)
		path := url.PathEscape(id)
		var target string
		requireCode := true
		header := map[string]string{}
		switch route % 6 {
		case 0:
			target = "/orders"
		case 1:
			target = "/orders/" + path + "/refunds"
		case 2:
			target = "/orders/" + path + "/cancel"
		case 3:
			target = "/orders/" + path + "/checkout"
		case 4:
			target, requireCode = "/admin/reconciliation/orders", false
			header["Authorization"] = "Bearer " + adminToken
		case 5:
			target = "/admin/orders/" + path + "/version"
			header["Authorization"] = "Bearer " + adminToken
			header[admin.OperatorHeader] = "fuzz"
		}
		httpapitest.CheckAnswer(t, httpapitest.Do(h, http.MethodPost, target, body, header), requireCode)
	})
}

// FuzzChangedQuery sends any query to GET /admin/reconciliation/orders,
// whose parameters are decoded by hand: never a 5xx.
func FuzzChangedQuery(f *testing.F) {
	f.Add("2026-01-02T15:04:05.123456Z", "2026-01-03T00:00:00Z", "O-1", "500")
	f.Add("yesterday", "", "O 1", "0")
	f.Add("", "", "", "1001")
	f.Add("2026-13-01T00:00:00Z", "9999-12-31T23:59:59.999999999+14:00", "O-1", "-1")
	f.Fuzz(func(t *testing.T, after, before, afterID, limit string) {
		q := url.Values{}
		for k, v := range map[string]string{"changedAfter": after, "changedBefore": before, "afterId": afterID, "limit": limit} {
			if v != "" {
				q.Set(k, v)
			}
		}
		rec := httpapitest.Do(fuzzServer(t), http.MethodGet, "/admin/reconciliation/orders?"+q.Encode(), nil,
			map[string]string{"Authorization": "Bearer " + adminToken})
		httpapitest.CheckAnswer(t, rec, false)
	})
}
