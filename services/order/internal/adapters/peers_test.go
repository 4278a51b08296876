package adapters_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
)

// fakeService answers fixed JSON per path (with the query string) and
// counts admin requests that carried the token.
func fakeService(t *testing.T, token string, answers map[string]string, authorized *atomic.Int32) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/admin/") && r.Header.Get("Authorization") == "Bearer "+token {
			authorized.Add(1)
		}
		body, ok := answers[r.URL.RequestURI()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestPeersView(t *testing.T) {
	t.Parallel()
	var authorized atomic.Int32
	dlq := func(n string) string { return `{"count":` + n + `,"items":[]}` }
	payment := fakeService(t, "tok", map[string]string{
		"/payments/orders/O-1":                   `{"orderId":"O-1","status":"SUCCEEDED"}`,
		"/admin/dlq?status=DEAD&aggregateId=O-1": dlq("0"),
	}, &authorized)
	inventory := fakeService(t, "tok", map[string]string{
		"/inventory/orders/O-1":                  `{"orderId":"O-1","status":"DEDUCTED"}`,
		"/admin/dlq?status=DEAD&aggregateId=O-1": dlq("1"),
	}, &authorized)
	points := fakeService(t, "tok", map[string]string{
		"/points/orders/O-1":                     `{"orderId":"O-1","count":1,"entries":[]}`,
		"/admin/dlq?status=DEAD&aggregateId=O-1": dlq("0"),
	}, &authorized)
	notification := fakeService(t, "tok", map[string]string{
		"/notifications?orderId=O-1":             `{"count":2,"items":[]}`,
		"/admin/dlq?status=DEAD&aggregateId=O-1": dlq("2"),
	}, &authorized)
	reconciliation := fakeService(t, "tok", map[string]string{
		"/admin/reconciliation/orders/O-1": `{"orderId":"O-1","converged":false,"findings":2,"mismatches":[]}`,
		"/admin/reconciliation/orders/O-2": `{"orderId":"O-2","converged":true,"findings":0,"mismatches":[]}`,
	}, &authorized)
	all := adapters.PeerURLs{Payment: payment, Inventory: inventory, Points: points, Notification: notification, Reconciliation: reconciliation}
	with := func(change func(*adapters.PeerURLs)) adapters.PeerURLs {
		u := all
		change(&u)
		return u
	}
	yes, no := true, false

	tests := []struct {
		name    string
		urls    adapters.PeerURLs
		orderID string
		want    app.PeerView
	}{
		{"every service answers", all, "O-1",
			app.PeerView{Payment: "SUCCEEDED", Inventory: "DEDUCTED", PointsLedger: 1, Notifications: 2, DLQ: 3, Converged: &no, Findings: 2}},
		{"nothing known yet", all, "O-2",
			app.PeerView{Payment: "NONE", Inventory: "NONE", PointsLedger: 0, Notifications: 0, DLQ: 0, Converged: &yes, Findings: 0}},
		{"payment down", with(func(u *adapters.PeerURLs) { u.Payment = deadURL(t) }), "O-1",
			app.PeerView{Payment: "UNKNOWN", Inventory: "DEDUCTED", PointsLedger: 1, Notifications: 2, DLQ: -1, Converged: &no, Findings: 2}},
		{"points down", with(func(u *adapters.PeerURLs) { u.Points = deadURL(t) }), "O-1",
			app.PeerView{Payment: "SUCCEEDED", Inventory: "DEDUCTED", PointsLedger: -1, Notifications: 2, DLQ: -1, Converged: &no, Findings: 2}},
		{"reconciliation down", with(func(u *adapters.PeerURLs) { u.Reconciliation = deadURL(t) }), "O-1",
			app.PeerView{Payment: "SUCCEEDED", Inventory: "DEDUCTED", PointsLedger: 1, Notifications: 2, DLQ: 3, Findings: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			peers := adapters.NewPeers(&http.Client{}, tt.urls, "tok", 2*time.Second)
			if got := peers.View(ctx(t), tt.orderID); fmt.Sprint(shown(got)) != fmt.Sprint(shown(tt.want)) {
				t.Fatalf("got %+v, want %+v", shown(got), shown(tt.want))
			}
		})
	}
	if authorized.Load() == 0 {
		t.Fatal("no admin request carried the admin token")
	}
}

func TestPeersViewTimesOut(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	peers := adapters.NewPeers(&http.Client{}, adapters.PeerURLs{Payment: slow.URL, Inventory: slow.URL, Points: slow.URL,
		Notification: slow.URL, Reconciliation: slow.URL}, "", 100*time.Millisecond)
	got := peers.View(ctx(t), "O-1")
	want := app.PeerView{Payment: "UNKNOWN", Inventory: "UNKNOWN", PointsLedger: -1, Notifications: -1, DLQ: -1, Findings: -1}
	if fmt.Sprint(shown(got)) != fmt.Sprint(shown(want)) {
		t.Fatalf("got %+v, want %+v", shown(got), shown(want))
	}
}

// shown is a view with its verdict as text, so views compare by value.
func shown(v app.PeerView) any {
	converged := "unknown"
	if v.Converged != nil {
		converged = fmt.Sprint(*v.Converged)
	}
	v.Converged = nil
	return struct {
		app.PeerView
		Converged string
	}{v, converged}
}
