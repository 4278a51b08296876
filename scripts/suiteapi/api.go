package suiteapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/services/inventory/inventoryapi"
	"github.com/reliable-orders/fulfillment/services/notification/notificationapi"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
	"github.com/reliable-orders/fulfillment/services/payment/paymentapi"
	"github.com/reliable-orders/fulfillment/services/points/pointsapi"
	"github.com/reliable-orders/fulfillment/services/reconciliation/reconciliationapi"
)

// Success is the businessCode of an accepted command.
const Success = "SUCCESS"

// The answers are the services' own types (orderapi, paymentapi,
// inventoryapi, pointsapi, notificationapi, reconciliationapi and the
// kit's): the names below are the client's vocabulary for them, so a
// drill, a test and the console read the same words. The arguments of the
// commands (NewOrder, PaymentRequest, Refund, OperatorRefund) take amounts
// as text and are sent as the service's request type.

// Item is an order line of NewOrder.
type Item struct {
	SKU       string
	Quantity  int
	UnitPrice string
}

// NewOrder is an order to create (POST /orders, orderapi.CreateRequest);
// an empty OrderID lets the service choose one.
type NewOrder struct {
	OrderID    string
	CustomerID string
	Currency   string
	Items      []Item
}

// request is the body of POST /orders for o.
func (o NewOrder) request() orderapi.CreateRequest {
	req := orderapi.CreateRequest{OrderID: o.OrderID, CustomerID: o.CustomerID, Currency: o.Currency}
	if o.Items != nil {
		req.Items = make([]orderapi.ItemRequest, len(o.Items))
	}
	for i, it := range o.Items {
		req.Items[i] = orderapi.ItemRequest{SKU: it.SKU, Quantity: it.Quantity, UnitPrice: &it.UnitPrice}
	}
	return req
}

// CommandResult is the answer of the order and payment commands
// (create, checkout, pay): businessCode and, for an order, its state.
type CommandResult = orderapi.Result

// PaymentRequest is a payment of an order (POST /payments,
// paymentapi.PayRequest).
type PaymentRequest struct {
	OrderID  string
	Amount   string
	Currency string
}

// OrderView is GET /orders/{id}.
type OrderView = orderapi.OrderView

// RefundView is one refund of an order as GET /orders/{id} shows it.
type RefundView = orderapi.RefundView

// OrderEvent is one of an order's outbox events (GET /orders/{id}/events).
type OrderEvent = orderapi.EventView

// OutboxStatus is one outbox row (GET /admin/outbox/{eventId}).
type OutboxStatus = outbox.Status

// Snapshot is the order's state across every service (README.md, API:
// GET /orders/{id}/snapshot).
type Snapshot = orderapi.Snapshot

// CreateOrder sends POST /orders. A 2xx answer with a businessCode other
// than SUCCESS is returned as it is, for the caller to judge.
func (c *Client) CreateOrder(ctx context.Context, o NewOrder) (CommandResult, error) {
	return call[CommandResult](ctx, c, Order, http.MethodPost, "/orders", o.request())
}

// Checkout sends POST /orders/{id}/checkout.
func (c *Client) Checkout(ctx context.Context, orderID string) (CommandResult, error) {
	return call[CommandResult](ctx, c, Order, http.MethodPost, "/orders/"+url.PathEscape(orderID)+"/checkout", nil)
}

// PlaceOrder creates and checks out an order and returns its amount; an
// answer other than SUCCESS and PENDING_PAYMENT is an error.
func (c *Client) PlaceOrder(ctx context.Context, o NewOrder) (string, error) {
	res, err := c.CreateOrder(ctx, o)
	if err != nil {
		return "", err
	}
	if res.BusinessCode != Success {
		return "", fmt.Errorf("create %s: businessCode %s", o.OrderID, res.BusinessCode)
	}
	if res, err = c.Checkout(ctx, o.OrderID); err != nil {
		return "", err
	}
	if res.BusinessCode != Success || res.Status != "PENDING_PAYMENT" {
		return "", fmt.Errorf("checkout %s: %s %s", o.OrderID, res.BusinessCode, res.Status)
	}
	if res.Amount == nil {
		return "", fmt.Errorf("checkout %s: no amount in the answer", o.OrderID)
	}
	return res.Amount.String(), nil
}

// Pay sends POST /payments. As CreateOrder, it leaves the businessCode of
// a 2xx answer to the caller.
func (c *Client) Pay(ctx context.Context, p PaymentRequest) (CommandResult, error) {
	body := paymentapi.PayRequest{OrderID: p.OrderID, Amount: paymentapi.Amount(p.Amount), Currency: p.Currency}
	return call[CommandResult](ctx, c, Payment, http.MethodPost, "/payments", body)
}

// Order reads GET /orders/{id}.
func (c *Client) Order(ctx context.Context, orderID string) (OrderView, error) {
	return get[OrderView](ctx, c, Order, "/orders/"+url.PathEscape(orderID))
}

// OrderEvents reads the order's outbox events, oldest first.
func (c *Client) OrderEvents(ctx context.Context, orderID string) ([]OrderEvent, error) {
	out, err := get[orderapi.EventsView](ctx, c, Order, "/orders/"+url.PathEscape(orderID)+"/events")
	return out.Events, err
}

// OutboxStatus reads one outbox row of the order service by event id.
func (c *Client) OutboxStatus(ctx context.Context, eventID string) (OutboxStatus, error) {
	return get[OutboxStatus](ctx, c, Order, "/admin/outbox/"+url.PathEscape(eventID))
}

// Snapshot reads GET /orders/{id}/snapshot.
func (c *Client) Snapshot(ctx context.Context, orderID string) (Snapshot, error) {
	return get[Snapshot](ctx, c, Order, "/orders/"+url.PathEscape(orderID)+"/snapshot")
}

// WaitSnapshot waits until the order's snapshot equals want in what the
// services hold (reconciliation's verdict, Converged and Findings, is not
// compared: it follows them) and returns how long that took; on a timeout
// the error shows the last one seen.
func (c *Client) WaitSnapshot(ctx context.Context, orderID string, want Snapshot, timeout time.Duration) (time.Duration, error) {
	var last Snapshot
	took, err := c.WaitFor(ctx, timeout, "snapshot of "+orderID, func() (bool, error) {
		var err error
		last, err = c.Snapshot(ctx, orderID)
		return Held(last) == Held(want), err
	})
	if err != nil {
		return took, fmt.Errorf("%w:\n got %+v\nwant %+v", err, last, want)
	}
	return took, nil
}

// Held is what the services hold of an order in s, without
// reconciliation's verdict (Converged, Findings), which follows them: the
// part a test compares with the snapshot it expects.
func Held(s Snapshot) Snapshot {
	s.Converged, s.Findings = nil, 0
	return s
}

// Stock is a SKU's inventory.
type Stock = inventoryapi.StockResponse

// SetStock sets a SKU's available stock (PUT /inventory/{sku}).
func (c *Client) SetStock(ctx context.Context, sku string, available int) error {
	return c.Call(ctx, Inventory, http.MethodPut, "/inventory/"+url.PathEscape(sku), inventoryapi.SetStockRequest{Available: &available}, nil)
}

// Stock reads a SKU's inventory.
func (c *Client) Stock(ctx context.Context, sku string) (Stock, error) {
	return get[Stock](ctx, c, Inventory, "/inventory/"+url.PathEscape(sku))
}

// InventoryState is the inventory consumer's state for an order (NONE,
// DEDUCTED, PARTIALLY_RESTOCKED, RESTOCKED, REJECTED).
func (c *Client) InventoryState(ctx context.Context, orderID string) (string, error) {
	out, err := get[inventoryapi.OrderResponse](ctx, c, Inventory, "/inventory/orders/"+url.PathEscape(orderID))
	return out.Status, err
}

// PointsEntry is one entry of an order's points ledger.
type PointsEntry = pointsapi.Entry

// PointsLedger reads an order's points ledger entries.
func (c *Client) PointsLedger(ctx context.Context, orderID string) ([]PointsEntry, error) {
	out, err := get[pointsapi.OrderResponse](ctx, c, Points, "/points/orders/"+url.PathEscape(orderID))
	return out.Entries, err
}

// Notice is one notification sent for an order.
type Notice = notificationapi.Item

// Notifications reads the notifications sent for an order.
func (c *Client) Notifications(ctx context.Context, orderID string) ([]Notice, error) {
	out, err := get[notificationapi.ListResponse](ctx, c, Notification, "/notifications?orderId="+url.QueryEscape(orderID))
	return out.Items, err
}

// ProcessedEventCount is a consumer's dedup row count for an event (0 or 1).
func (c *Client) ProcessedEventCount(ctx context.Context, service, eventID string) (int, error) {
	d, err := c.Dedup(ctx, service, eventID)
	return d.Count, err
}

// Dedup is a consumer's dedup record of one event, as
// GET /admin/processed-events/{eventId} answers it: Count is the number of
// dedup rows (0 or 1), Duplicates the copies after the first that the
// consumer recognised as duplicates.
type Dedup = admin.ProcessedEvent

// Dedup reads a consumer's dedup record of eventID.
func (c *Client) Dedup(ctx context.Context, service, eventID string) (Dedup, error) {
	return get[Dedup](ctx, c, service, "/admin/processed-events/"+url.PathEscape(eventID))
}

// WaitConsumed waits until every named consumer has processed eventID.
func (c *Client) WaitConsumed(ctx context.Context, timeout time.Duration, eventID string, services ...string) (time.Duration, error) {
	return c.WaitFor(ctx, timeout, "event "+eventID+" consumed", func() (bool, error) {
		for _, svc := range services {
			n, err := c.ProcessedEventCount(ctx, svc, eventID)
			if err != nil || n < 1 {
				return false, err
			}
		}
		return true, nil
	})
}

// DeadLetter is a DLQ record with the metadata of docs/design.md, Dead
// letters (key and value arrive base64-encoded, as encoding/json writes
// and reads []byte).
type DeadLetter = dlq.Record

// DeadLetters lists a consumer's dead letters of an aggregate; status
// (DEAD, REPLAYED) filters them, "" lists all.
func (c *Client) DeadLetters(ctx context.Context, service, aggregateID, status string) ([]DeadLetter, error) {
	q := url.Values{"aggregateId": {aggregateID}}
	if status != "" {
		q.Set("status", status)
	}
	out, err := get[admin.DeadLetters](ctx, c, service, "/admin/dlq?"+q.Encode())
	return out.Items, err
}

// DLQCount sums the outstanding (not yet replayed) dead letters of an
// order over the named consumers.
func (c *Client) DLQCount(ctx context.Context, orderID string, services ...string) (int, error) {
	n := 0
	for _, svc := range services {
		out, err := get[admin.DeadLetters](ctx, c, svc, "/admin/dlq?"+url.Values{"status": {"DEAD"}, "aggregateId": {orderID}}.Encode())
		if err != nil {
			return 0, err
		}
		n += out.Count
	}
	return n, nil
}

// ReplayAudit is one audited replay request of a dead letter.
type ReplayAudit = dlq.ReplayAudit

// Inspect reads a dead letter and the audit of its replays
// (GET /admin/dlq/{id}), oldest first.
func (c *Client) Inspect(ctx context.Context, service string, id int64) (DeadLetter, []ReplayAudit, error) {
	out, err := get[admin.DeadLetter](ctx, c, service, "/admin/dlq/"+strconv.FormatInt(id, 10))
	return out.Record, out.Replays, err
}

// ReplayResult is the answer of a replay.
type ReplayResult = dlq.ReplayResult

// Replay replays a dead letter in the name of requestedBy, who the audit
// records (X-Operator, pkg/admin).
func (c *Client) Replay(ctx context.Context, service string, id int64, requestedBy string) (ReplayResult, error) {
	return c.ReplayWithKey(ctx, service, id, requestedBy, "")
}

// ReplayWithKey is Replay with key as its Idempotency-Key ("": a fresh
// one), so a request sent again — a double click, a retry after a lost
// answer — gets the first one's answer instead of a second replay.
func (c *Client) ReplayWithKey(ctx context.Context, service string, id int64, requestedBy, key string) (ReplayResult, error) {
	header := requestedByHeader(requestedBy)
	if key != "" {
		header.Set(IdempotencyKeyHeader, key)
	}
	var out ReplayResult
	_, err := c.Do(ctx, service, http.MethodPost, "/admin/dlq/"+strconv.FormatInt(id, 10)+"/replay", header, nil, &out)
	return out, err
}

// Refund is a customer's refund (POST /orders/{id}/refunds,
// orderapi.RefundRequest): an amount, goods returned, or both.
type Refund struct {
	Amount string
	Items  []Line
}

// request is the body of the refund r asks for.
func (r Refund) request() orderapi.RefundRequest {
	req := orderapi.RefundRequest{Items: r.Items}
	if r.Amount != "" {
		req.Amount = &r.Amount
	}
	return req
}

// AmountText is an amount of an answer as text: "" when the answer has
// none.
func AmountText(m *event.Money) string {
	if m == nil {
		return ""
	}
	return m.String()
}

// RefundAnswer is the order service's answer to a refund: SUCCESS or a
// named rejection, the refund's id and amount, where the order stands,
// and whether the answer was given again for a key the service had seen
// (Idempotent-Replayed).
type RefundAnswer struct {
	orderapi.Result
	Replayed bool
}

// Refund sends r for orderID with key as its Idempotency-Key. An empty
// key sends none, as a client that does not send one: each such request
// runs (README.md, Retrying safely).
func (c *Client) Refund(ctx context.Context, orderID, key string, r Refund) (RefundAnswer, error) {
	var header http.Header
	if key != "" {
		header = http.Header{IdempotencyKeyHeader: {key}}
	}
	path := "/orders/" + url.PathEscape(orderID) + "/refunds"
	code, answer, raw, err := c.roundTrip(ctx, Order, http.MethodPost, path, header, r.request(), false)
	if err != nil {
		return RefundAnswer{}, err
	}
	if code/100 != 2 {
		return RefundAnswer{}, statusError(http.MethodPost, c.URL(Order)+path, code, raw)
	}
	var out RefundAnswer
	if err := json.Unmarshal(raw, &out.Result); err != nil {
		return RefundAnswer{}, fmt.Errorf("POST %s: answer is not the JSON expected: %w", c.URL(Order)+path, err)
	}
	out.Replayed = answer.Get(ReplayedHeader) == "true"
	return out, nil
}

// DefaultOperator names who asks for an operator action when a caller
// names no one.
const DefaultOperator = "suiteapi"

// requestedByHeader names who asks for an operator action (X-Operator,
// which every operator route requires and its audit records).
func requestedByHeader(who string) http.Header {
	who = cmp.Or(who, DefaultOperator)
	return http.Header{"X-Operator": {who}}
}

// OperatorRefund is an operator's refund (POST
// /admin/payments/orders/{id}/refunds, paymentapi.RefundBody): an amount,
// goods returned, or both, and why.
type OperatorRefund struct {
	RefundID string
	Amount   string
	Items    []Line
	Reason   string
}

// body is the request of the refund r asks for; what r leaves empty is
// left out.
func (r OperatorRefund) body() (paymentapi.RefundBody, error) {
	b := paymentapi.RefundBody{RefundID: r.RefundID, Reason: r.Reason}
	if r.Amount != "" {
		b.Amount = paymentapi.Amount(r.Amount)
	}
	if len(r.Items) > 0 {
		items, err := json.Marshal(r.Items)
		if err != nil {
			return b, fmt.Errorf("encode refund items: %w", err)
		}
		b.Items = items
	}
	return b, nil
}

// Line is a quantity of one SKU, as a refund returns it.
type Line = orderapi.LineRequest

// OperatorRefundAnswer is the payment service's answer: REQUESTED when the
// order service recorded it (the order holds the payment), SUCCEEDED or
// REJECTED when made at once.
type OperatorRefundAnswer = paymentapi.RefundResponse

// OperatorRefund sends r for orderID in the name of operator (X-Operator,
// which the refund's audit records).
func (c *Client) OperatorRefund(ctx context.Context, orderID, operator string, r OperatorRefund) (OperatorRefundAnswer, error) {
	var out OperatorRefundAnswer
	body, err := r.body()
	if err != nil {
		return out, err
	}
	_, err = c.Do(ctx, Payment, http.MethodPost, "/admin/payments/orders/"+url.PathEscape(orderID)+"/refunds",
		requestedByHeader(operator), body, &out)
	return out, err
}

// ArmFailPoint arms a fail point of a service at run time; times 0 fires
// every time, action "off" disarms it (and keeps its hit count, so the
// caller can check afterwards that it fired: FailPointFired). A name the
// service does not declare is refused (UNKNOWN_FAIL_POINT, the message
// lists the declared ones).
func (c *Client) ArmFailPoint(ctx context.Context, service, name, action string, times int) error {
	err := c.Call(ctx, service, http.MethodPut, "/admin/failpoints/"+url.PathEscape(name),
		admin.FailPointRequest{Action: action, Times: times}, nil)
	return failPointsError(service, err)
}

// CodeUnknownFailPoint answers a fail point name a service does not
// declare.
const CodeUnknownFailPoint = "UNKNOWN_FAIL_POINT"

// failPointsError explains a 404 of the fail point routes: a name the
// service does not declare, or a service started without fail points.
func failPointsError(service string, err error) error {
	var se *StatusError
	switch {
	case !errors.As(err, &se) || se.Status != http.StatusNotFound:
		return err
	case se.BusinessCode == CodeUnknownFailPoint:
		return fmt.Errorf("%s: %w", service, err)
	}
	return fmt.Errorf("%s serves no fail points: start it with FAILPOINTS_ENABLED=true (make run does; compose: FAILPOINTS_ENABLED=true make up): %w", service, err)
}

// FailPoint is one of a service's declared fail points (GET
// /admin/failpoints).
type FailPoint = failpoint.Point

// FailPoints lists a service's declared fail points with their action,
// remaining count and hits.
func (c *Client) FailPoints(ctx context.Context, service string) ([]FailPoint, error) {
	out, err := get[admin.FailPoints](ctx, c, service, "/admin/failpoints")
	return out.Points, failPointsError(service, err)
}

// FailPointHits is how often a service's fail point fired since it was
// last armed.
func (c *Client) FailPointHits(ctx context.Context, service, name string) (int, error) {
	points, err := c.FailPoints(ctx, service)
	if err != nil {
		return 0, err
	}
	for _, p := range points {
		if p.Name == name {
			return p.Hits, nil
		}
	}
	return 0, fmt.Errorf("%s does not declare fail point %s", service, name)
}

// FailPointFired is an error unless a service's fail point fired at least
// atLeast times since it was last armed: whoever arms a fault proves that it
// happened, so a test cannot pass without its fault.
func (c *Client) FailPointFired(ctx context.Context, service, name string, atLeast int) error {
	hits, err := c.FailPointHits(ctx, service, name)
	if err != nil {
		return err
	}
	if hits < atLeast {
		return fmt.Errorf("%s fail point %s fired %d times, want at least %d: the fault never happened", service, name, hits, atLeast)
	}
	return nil
}

// FailConsumer makes a consumer's apply step fail times times with a
// retryable error (the fail point "<service>.apply").
func (c *Client) FailConsumer(ctx context.Context, service string, times int) error {
	return c.ArmFailPoint(ctx, service, service+".apply", "error", times)
}

// Finding is one mismatch a reconciliation run found, what it did, and
// which run recorded it, when.
type Finding = reconciliationapi.FindingView

// Run is a reconciliation run as POST /admin/reconciliation/runs (the run
// started, RUNNING) and GET /admin/reconciliation/runs/{id} (how far it
// has got, or how it ended) answer it.
type Run = reconciliationapi.RunView

// OrphanScan is how far a run's orphan pass has read one consumer's list
// of the orders it holds effects for.
type OrphanScan = reconciliationapi.OrphanScanView

// Kinds lists the run's findings as "KIND service ACTION".
func Kinds(r Run) []string {
	out := []string{}
	for _, f := range r.Findings {
		out = append(out, f.Kind+" "+f.Service+" "+f.Action)
	}
	return out
}

// RunRequest is the body of POST /admin/reconciliation/runs: the orders
// to reconcile (none: every order, and the effects of orders the order
// service does not know) and the minimum age of their last change ("":
// the convergence deadline, "0s": any age).
type RunRequest = reconciliationapi.RunRequest

// Running is the status of a run the service is still doing.
const Running = "RUNNING"

// ReconciliationRun reads run id (GET /admin/reconciliation/runs/{id}):
// while RUNNING, how far it has got; once done, how it ended and every
// finding.
func (c *Client) ReconciliationRun(ctx context.Context, id int64) (Run, error) {
	return get[Run](ctx, c, Reconciliation, "/admin/reconciliation/runs/"+strconv.FormatInt(id, 10))
}

// RunSummary is a reconciliation run without its findings.
type RunSummary = reconciliationapi.RunSummary

// ReconciliationRuns lists the latest reconciliation runs, newest first
// (GET /admin/reconciliation/runs).
func (c *Client) ReconciliationRuns(ctx context.Context) ([]RunSummary, error) {
	out, err := get[reconciliationapi.RunsView](ctx, c, Reconciliation, "/admin/reconciliation/runs")
	return out.Runs, err
}

// AwaitRun polls run id until it is no longer RUNNING, as often as the
// client polls at first and then less often, up to once every
// maxRunPoll, and returns it as it ended; progress, when not nil, gets the
// run as read at each poll. It stops when ctx ends.
func (c *Client) AwaitRun(ctx context.Context, id int64, progress func(Run)) (Run, error) {
	var r Run
	err := c.backOff(ctx, func() (bool, error) {
		var err error
		if r, err = c.ReconciliationRun(ctx, id); err != nil || r.Status != Running {
			return true, err
		}
		if progress != nil {
			progress(r)
		}
		return false, nil
	}, func() string {
		return fmt.Sprintf("reconciliation run %d still RUNNING, %d orders checked", id, r.Checked)
	})
	return r, err
}

// maxRunPoll bounds how long AwaitRun and RunReconciliation wait between
// two looks at a run.
const maxRunPoll = 2 * time.Second

// RunReconciliation starts a run of req and waits for it to end: the one
// way the drills, the tests and make reconcile run reconciliation. A run
// already going (409 RUN_IN_PROGRESS: one runs at a time) is waited out
// and the start sent again, with the same Idempotency-Key, so a start
// whose answer was lost starts one run. progress, when not nil, gets the
// run at each look while it runs (a run waited out is not reported). A
// run that did not succeed is an error, returned with the run.
func (c *Client) RunReconciliation(ctx context.Context, requestedBy string, req RunRequest, progress func(Run)) (Run, error) {
	key, err := NewIdempotencyKey()
	if err != nil {
		return Run{}, err
	}
	header := requestedByHeader(requestedBy)
	header.Set(IdempotencyKeyHeader, key)
	var (
		started Run
		se      *StatusError
	)
	if err := c.backOff(ctx, func() (bool, error) {
		_, err := c.Do(ctx, Reconciliation, http.MethodPost, "/admin/reconciliation/runs", header, req, &started)
		inProgress := errors.As(err, &se) && se.Status == http.StatusConflict && se.BusinessCode == "RUN_IN_PROGRESS"
		return !inProgress, err
	}, func() string { return fmt.Sprintf("waiting for another run to end (%s)", se.Message) }); err != nil {
		return Run{}, err
	}
	r, err := c.AwaitRun(ctx, started.ID, progress)
	if err == nil && r.Status != "SUCCEEDED" {
		err = fmt.Errorf("reconciliation run %d %s: %s", r.ID, r.Status, r.Error)
	}
	return r, err
}

// Reconcile runs reconciliation over the orders named (none: every order,
// and the effects of orders the order service does not know), whatever
// their age, in the name of requestedBy ("" leaves it to the service), and
// waits for it to end (RunReconciliation). A run that did not succeed is
// an error, returned with the run.
func (c *Client) Reconcile(ctx context.Context, requestedBy string, orderIDs ...string) (Run, error) {
	return c.RunReconciliation(ctx, requestedBy, RunRequest{OrderIDs: orderIDs, MinAge: "0s"}, nil)
}

// backOff calls step until it is done or fails, waiting between two
// calls the client's poll interval at first and then twice as long each
// time, up to maxRunPoll. When ctx ends while it waits, the error says
// what it was waiting for (waiting).
func (c *Client) backOff(ctx context.Context, step func() (done bool, err error), waiting func() string) error {
	for wait := c.cfg.PollInterval; ; wait = min(2*wait, maxRunPoll) {
		if done, err := step(); done {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w", waiting(), ctx.Err())
		case <-t.C:
		}
	}
}

// Mismatch is what keeps an order from converging.
type Mismatch = reconciliationapi.MismatchView

// Convergence is reconciliation's verdict on an order at the time of the
// call.
type Convergence = reconciliationapi.CheckView

// Converged asks reconciliation whether every service has reached what
// the order's state requires (GET /admin/reconciliation/orders/{id}).
func (c *Client) Converged(ctx context.Context, orderID string) (Convergence, error) {
	return get[Convergence](ctx, c, Reconciliation, "/admin/reconciliation/orders/"+url.PathEscape(orderID))
}
