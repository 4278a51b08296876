package suiteapi

import (
	"context"
	"net/url"
	"strconv"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
	"github.com/reliable-orders/fulfillment/services/reconciliation/reconciliationapi"
)

// The answers below are the kit's own types (pkg/admin, pkg/lag,
// pkg/tracing), the ones the services' handlers write, not copies.

// Span is a span as a service kept it (GET /admin/traces).
type Span = tracing.Span

// Traces reads the spans of traceID a service kept in memory, oldest
// first: the spans it recorded of that trace and has not overwritten yet.
func (c *Client) Traces(ctx context.Context, service, traceID string) ([]Span, error) {
	out, err := get[admin.TracesView](ctx, c, service, "/admin/traces?"+url.Values{"traceId": {traceID}}.Encode())
	return out.Spans, err
}

// RecentSpans reads the newest limit spans a service kept, of any trace,
// oldest first: how a batch that applied an event in another trace's
// transaction is found by its link.
func (c *Client) RecentSpans(ctx context.Context, service string, limit int) ([]Span, error) {
	out, err := get[admin.TracesView](ctx, c, service, "/admin/traces?limit="+strconv.Itoa(limit))
	return out.Spans, err
}

// OutboxBacklog is a producer's outbox backlog (GET /admin/outbox) with,
// when asked for by aggregate, that aggregate's rows.
type OutboxBacklog = admin.OutboxBacklog

// Outbox reads a producer's outbox backlog and aggregateID's rows, oldest
// first ("" reads the backlog alone). The order service's rows are the
// order's events, the payment's and inventory's its callbacks.
func (c *Client) Outbox(ctx context.Context, service, aggregateID string) (OutboxBacklog, error) {
	path := "/admin/outbox"
	if aggregateID != "" {
		path += "?" + url.Values{"aggregateId": {aggregateID}}.Encode()
	}
	return get[OutboxBacklog](ctx, c, service, path)
}

// LagReport is a consumer's lag, oldest unprocessed age and rates
// (GET /admin/lag).
type LagReport = lag.Report

// Lag reads a consumer's GET /admin/lag.
func (c *Client) Lag(ctx context.Context, service string) (LagReport, error) {
	return get[LagReport](ctx, c, service, "/admin/lag")
}

// Findings reads everything reconciliation's runs recorded for an order
// (GET /admin/reconciliation/findings?orderId=), oldest first.
func (c *Client) Findings(ctx context.Context, orderID string) ([]Finding, error) {
	out, err := get[reconciliationapi.FindingsView](ctx, c, Reconciliation, "/admin/reconciliation/findings?"+url.Values{"orderId": {orderID}}.Encode())
	return out.Findings, err
}
