package adapters

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/services/order/internal/app"
)

// What the snapshot shows for a part of the chain it could not read, and
// for a part that has nothing about the order yet.
const (
	StatusUnknown = "UNKNOWN"
	StatusNone    = "NONE"
	CountUnknown  = -1
)

// maxPeerBody bounds what is read from another service's answer.
const maxPeerBody = 1 << 20

// PeerURLs are the base URLs of the services the snapshot reads.
type PeerURLs struct {
	Payment        string
	Inventory      string
	Points         string
	Notification   string
	Reconciliation string
}

// Peers reads the other services over HTTP for the order snapshot. Each
// read is bounded by a timeout and a failed read degrades to UNKNOWN or -1
// for that part alone: the snapshot is a diagnostic, and one service being
// down is exactly when it is most needed.
type Peers struct {
	client     *http.Client
	urls       PeerURLs
	adminToken string
	timeout    time.Duration
}

// NewPeers returns a reader of the services at urls. adminToken, when set,
// is sent to their /admin endpoints; timeout bounds one whole View.
func NewPeers(client *http.Client, urls PeerURLs, adminToken string, timeout time.Duration) *Peers {
	return &Peers{client: client, urls: urls, adminToken: adminToken, timeout: timeout}
}

// View queries every service concurrently. Payment and inventory show
// their status ("NONE" when they have no record of the order, "UNKNOWN"
// when they could not be read); the ledger, notification, DLQ and finding
// counts show -1 when unknown, and converged null. The DLQ count is the sum of the outstanding (DEAD,
// not yet replayed) dead letters over the four consumers
// (inventory, points, notification, payment) and is -1 if any of them
// could not be read.
func (p *Peers) View(ctx context.Context, orderID string) app.PeerView {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	path := url.PathEscape(orderID)
	query := url.QueryEscape(orderID)
	consumers := []string{p.urls.Inventory, p.urls.Points, p.urls.Notification, p.urls.Payment}
	dlq := make([]int, len(consumers))
	var v app.PeerView
	var g errgroup.Group
	g.Go(func() error {
		v.Payment = p.status(ctx, join(p.urls.Payment, "/payments/orders/"+path))
		return nil
	})
	g.Go(func() error {
		v.Inventory = p.status(ctx, join(p.urls.Inventory, "/inventory/orders/"+path))
		return nil
	})
	g.Go(func() error {
		v.PointsLedger = p.count(ctx, join(p.urls.Points, "/points/orders/"+path), false)
		return nil
	})
	g.Go(func() error {
		v.Notifications = p.count(ctx, join(p.urls.Notification, "/notifications?orderId="+query), false)
		return nil
	})
	for i, base := range consumers {
		g.Go(func() error {
			dlq[i] = p.count(ctx, join(base, "/admin/dlq?status=DEAD&aggregateId="+query), true)
			return nil
		})
	}
	g.Go(func() error {
		v.Converged, v.Findings = p.convergence(ctx, join(p.urls.Reconciliation, "/admin/reconciliation/orders/"+path))
		return nil
	})
	_ = g.Wait() // every goroutine reports through v and dlq, never an error
	for _, n := range dlq {
		if n == CountUnknown {
			v.DLQ = CountUnknown
			break
		}
		v.DLQ += n
	}
	return v
}

func join(base, path string) string { return strings.TrimRight(base, "/") + path }

func (p *Peers) status(ctx context.Context, u string) string {
	var body struct {
		Status string `json:"status"`
	}
	found, err := p.get(ctx, u, false, &body)
	switch {
	case err != nil:
		return StatusUnknown
	case !found:
		return StatusNone
	case body.Status == "":
		return StatusUnknown
	}
	return body.Status
}

func (p *Peers) count(ctx context.Context, u string, admin bool) int {
	var body struct {
		Count *int `json:"count"`
	}
	found, err := p.get(ctx, u, admin, &body)
	switch {
	case err != nil:
		return CountUnknown
	case !found:
		return 0
	case body.Count == nil:
		return CountUnknown
	}
	return *body.Count
}

// convergence reads reconciliation's check of the order.
func (p *Peers) convergence(ctx context.Context, u string) (*bool, int) {
	var body struct {
		Converged *bool `json:"converged"`
		Findings  *int  `json:"findings"`
	}
	found, err := p.get(ctx, u, true, &body)
	if err != nil || !found || body.Converged == nil || body.Findings == nil {
		return nil, CountUnknown
	}
	return body.Converged, *body.Findings
}

// get decodes the JSON answer of u into out; a 404 is found == false.
func (p *Peers) get(ctx context.Context, u string, admin bool, out any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("request %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	if admin && p.adminToken != "" {
		req.Header.Set("Authorization", "Bearer "+p.adminToken)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return false, fmt.Errorf("get %s: %w", u, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return false, nil
	case resp.StatusCode != http.StatusOK:
		return false, fmt.Errorf("get %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPeerBody)).Decode(out); err != nil {
		return false, fmt.Errorf("decode %s: %w", u, err)
	}
	return true, nil
}
