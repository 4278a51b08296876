// Package adapters connects reconciliation to the outside world: the other
// services' read-only views and compensation endpoints over HTTP, and its
// own audit tables in Postgres.
package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/inventory/inventoryapi"
	"github.com/reliable-orders/fulfillment/services/notification/notificationapi"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
	"github.com/reliable-orders/fulfillment/services/payment/paymentapi"
	"github.com/reliable-orders/fulfillment/services/points/pointsapi"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// maxAnswer bounds what is read of one answer: a page of 1 000 orders'
// views stays well below it.
const maxAnswer = 64 << 20

// PeerURLs are the base URLs of the services reconciliation reads.
type PeerURLs struct {
	Order        string
	Payment      string
	Inventory    string
	Points       string
	Notification string
}

func (u PeerURLs) of(service string) string {
	switch service {
	case rec.ServiceOrder:
		return u.Order
	case rec.ServicePayment:
		return u.Payment
	case rec.ServiceInventory:
		return u.Inventory
	case rec.ServicePoints:
		return u.Points
	case rec.ServiceNotification:
		return u.Notification
	}
	return ""
}

// Peers reads the services' views and takes compensations through their
// APIs; it never touches another service's database.
type Peers struct {
	client     *http.Client
	urls       PeerURLs
	adminToken string
}

// NewPeers returns a client of the services at urls; adminToken, when set,
// is sent to their /admin endpoints.
func NewPeers(client *http.Client, urls PeerURLs, adminToken string) *Peers {
	return &Peers{client: client, urls: urls, adminToken: adminToken}
}

// call sends a JSON request to service and decodes its 200 answer into out.
func (p *Peers) call(ctx context.Context, service, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request to %s: %w", service, err)
		}
		r = bytes.NewReader(raw)
	}
	u := strings.TrimRight(p.urls.of(service), "/") + path
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return fmt.Errorf("request %s %s: %w", method, u, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.adminToken != "" {
		req.Header.Set("Authorization", "Bearer "+p.adminToken)
	}
	req.Header.Set(admin.OperatorHeader, app.RequestedByOf(ctx))
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %w", app.ErrUnavailable, method, u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%w: %s %s: read answer: %w", app.ErrUnavailable, method, u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Service: service, Method: method, URL: u, Status: resp.StatusCode, Body: string(raw)}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%w: %s %s: decode answer: %w", app.ErrUnavailable, method, u, err)
	}
	return nil
}

// StatusError is an answer other than 200.
type StatusError struct {
	Service, Method, URL string
	Status               int
	Body                 string
}

func (e *StatusError) Error() string {
	body := e.Body
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	return fmt.Sprintf("%s %s answered %d: %s", e.Method, e.URL, e.Status, body)
}

// Unwrap makes a 5xx an app.ErrUnavailable.
func (e *StatusError) Unwrap() error {
	if e.Status >= 500 {
		return app.ErrUnavailable
	}
	return nil
}

// ChangedOrders returns up to limit orders that changed after cursor (and
// before before, when it is set), oldest change first, and the cursor after
// them; next is nil at the end.
func (p *Peers) ChangedOrders(ctx context.Context, after app.Cursor, before time.Time, limit int) ([]rec.Order, *app.Cursor, error) {
	q := url.Values{}
	if !after.ChangedAfter.IsZero() {
		q.Set("changedAfter", after.ChangedAfter.UTC().Format(time.RFC3339Nano))
	}
	if after.AfterID != "" {
		q.Set("afterId", after.AfterID)
	}
	if !before.IsZero() {
		q.Set("changedBefore", before.UTC().Format(time.RFC3339Nano))
	}
	q.Set("limit", strconv.Itoa(limit))
	var page orderapi.ChangedViews
	if err := p.call(ctx, rec.ServiceOrder, http.MethodGet, "/admin/reconciliation/orders?"+q.Encode(), nil, &page); err != nil {
		return nil, nil, err
	}
	orders := make([]rec.Order, len(page.Orders))
	for i, v := range page.Orders {
		orders[i] = orderOf(v)
	}
	if page.Next == nil {
		return orders, nil, nil
	}
	changedAfter, err := time.Parse(time.RFC3339Nano, page.Next.ChangedAfter)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: order service's next page: changedAfter %q: %w", app.ErrUnavailable, page.Next.ChangedAfter, err)
	}
	return orders, &app.Cursor{ChangedAfter: changedAfter, AfterID: page.Next.AfterID}, nil
}

// EffectOrders returns up to limit of the order ids service holds effects
// for, after after in id order, last written before before, and the after
// of the next page ("" at the end).
func (p *Peers) EffectOrders(ctx context.Context, service, after string, before time.Time, limit int) ([]string, string, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	q.Set("before", before.UTC().Format(time.RFC3339Nano))
	q.Set("limit", strconv.Itoa(limit))
	var page admin.EffectOrders
	if err := p.call(ctx, service, http.MethodGet, "/admin/reconciliation/effects?"+q.Encode(), nil, &page); err != nil {
		return nil, "", err
	}
	return page.OrderIDs, page.Next, nil
}

// Orders returns the order service's view of each id, in order.
func (p *Peers) Orders(ctx context.Context, ids []string) ([]rec.Order, error) {
	var page orderapi.ReconciliationViews
	if err := p.call(ctx, rec.ServiceOrder, http.MethodPost, "/admin/reconciliation/orders", idsBody(ids), &page); err != nil {
		return nil, err
	}
	if len(page.Orders) != len(ids) {
		return nil, fmt.Errorf("%w: order service answered %d views for %d ids", app.ErrUnavailable, len(page.Orders), len(ids))
	}
	orders := make([]rec.Order, len(page.Orders))
	for i, v := range page.Orders {
		orders[i] = orderOf(v)
	}
	return orders, nil
}

// UnknownOrders returns those of ids the order service does not know, in
// the order given: the orphan pass's look-up, which needs no view of the
// orders it knows.
func (p *Peers) UnknownOrders(ctx context.Context, ids []string) ([]string, error) {
	var out orderapi.UnknownOrders
	if err := p.call(ctx, rec.ServiceOrder, http.MethodPost, "/admin/reconciliation/unknown-orders", idsBody(ids), &out); err != nil {
		return nil, err
	}
	return out.OrderIDs, nil
}

func idsBody(ids []string) admin.OrderIDsRequest { return admin.OrderIDsRequest{OrderIDs: ids} }

// Facts reads what the payment, inventory, points and notification
// services know about orders, four requests at once, and returns the facts
// of each order, in order.
func (p *Peers) Facts(ctx context.Context, orders []rec.Order) ([]rec.Facts, error) {
	ids := make([]string, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
	}
	var (
		payments      admin.ReconciliationViews[paymentapi.ReconciliationView]
		inventories   admin.ReconciliationViews[inventoryapi.ReconciliationView]
		points        admin.ReconciliationViews[pointsapi.ReconciliationView]
		notifications admin.ReconciliationViews[notificationapi.ReconciliationView]
	)
	g, gctx := errgroup.WithContext(ctx)
	for service, out := range map[string]any{rec.ServicePayment: &payments, rec.ServiceInventory: &inventories,
		rec.ServicePoints: &points, rec.ServiceNotification: &notifications} {
		g.Go(func() error {
			return p.call(gctx, service, http.MethodPost, "/admin/reconciliation/orders", idsBody(ids), out)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for service, n := range map[string]int{rec.ServicePayment: len(payments.Orders), rec.ServiceInventory: len(inventories.Orders),
		rec.ServicePoints: len(points.Orders), rec.ServiceNotification: len(notifications.Orders)} {
		if n != len(ids) {
			return nil, fmt.Errorf("%w: %s answered %d views for %d ids", app.ErrUnavailable, service, n, len(ids))
		}
	}
	facts := make([]rec.Facts, len(orders))
	for i, o := range orders {
		pts, err := pointsOf(points.Orders[i])
		if err != nil {
			return nil, err
		}
		facts[i] = rec.Facts{Order: o, Payment: paymentOf(payments.Orders[i]), Inventory: inventoryOf(inventories.Orders[i]),
			Points: pts, Notifications: notificationsOf(notifications.Orders[i])}
	}
	return facts, nil
}

// Refund asks the payment service to refund amount of the order's payment
// under refundID (idempotent per refundID), and returns what became of it.
func (p *Peers) Refund(ctx context.Context, orderID, refundID string, amount decimal.Decimal, reason string) (string, error) {
	var out paymentapi.RefundResponse
	body := paymentapi.RefundBody{RefundID: refundID, Amount: paymentapi.Amount(money(amount)), Reason: reason}
	if err := p.call(ctx, rec.ServicePayment, http.MethodPost, "/admin/payments/orders/"+url.PathEscape(orderID)+"/refunds", body, &out); err != nil {
		return "", err
	}
	if out.Reason != "" {
		return fmt.Sprintf("refund %s %s %s (%s)", refundID, money(amount), out.Status, out.Reason), nil
	}
	return fmt.Sprintf("refund %s %s %s", refundID, money(amount), out.Status), nil
}

// Republish makes outbox rows of service due again, oldest first: its
// relay sends them under their original event ids.
func (p *Peers) Republish(ctx context.Context, service string, eventIDs []string) (string, error) {
	for _, id := range eventIDs {
		var out outbox.Status
		if err := p.call(ctx, service, http.MethodPost, "/admin/outbox/"+url.PathEscape(id)+"/republish", nil, &out); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d messages of %s due again", len(eventIDs), service), nil
}

// Replay replays a dead letter of service and returns the replay's outcome.
func (p *Peers) Replay(ctx context.Context, service string, deadLetterID int64) (string, error) {
	var out dlq.ReplayResult
	if err := p.call(ctx, service, http.MethodPost, "/admin/dlq/"+strconv.FormatInt(deadLetterID, 10)+"/replay", nil, &out); err != nil {
		return "", err
	}
	return fmt.Sprintf("dead letter %d of %s (%s) %s", deadLetterID, service, out.EventID, out.Outcome), nil
}

// Fence asks the order service to raise the order's version to at least
// atLeast (POST /admin/orders/{id}/version), and returns where the order
// stands after it.
func (p *Peers) Fence(ctx context.Context, orderID string, atLeast int64) (string, error) {
	var out orderapi.FenceAnswer
	body := orderapi.FenceRequest{AtLeast: &atLeast}
	if err := p.call(ctx, rec.ServiceOrder, http.MethodPost, "/admin/orders/"+url.PathEscape(orderID)+"/version", body, &out); err != nil {
		return "", err
	}
	if out.Version < atLeast {
		return "", fmt.Errorf("order service answered %s at version %d to a fence at %d", orderID, out.Version, atLeast)
	}
	return fmt.Sprintf("order %s fenced at version %d (%s)", orderID, out.Version, out.Status), nil
}

func money(d decimal.Decimal) string { return d.StringFixed(rules.MoneyPlaces) }
