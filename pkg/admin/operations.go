package admin

import (
	"fmt"
	"net/http"

	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// FailPointSet answers PUT /admin/failpoints/{name}: the point and how it
// is armed.
type FailPointSet struct {
	Name   string `json:"name"`
	Action string `json:"action"`
	Times  int    `json:"times"`
}

// ConsumerOperations describe the routes of RegisterConsumer and
// RegisterReplay.
func ConsumerOperations() []apispec.Operation {
	return []apispec.Operation{
		{Method: http.MethodGet, Path: "/admin/processed-events/:eventId", Summary: "How often the consumer received an event.",
			Answer: ProcessedEvent{}},
		{Method: http.MethodGet, Path: "/admin/dlq", Summary: "The dead letters, filtered by aggregate and status.",
			Query: []string{"aggregateId", "status"}, Answer: DeadLetters{}},
		{Method: http.MethodGet, Path: "/admin/dlq/:id", Summary: "One dead letter and its replays.", Answer: DeadLetter{}},
		{Method: http.MethodPost, Path: "/admin/dlq/:id/replay", Summary: "Send a dead letter back to its topic (X-Operator required).",
			Answer: dlq.ReplayResult{}},
	}
}

// FailPointOperations describe the routes of RegisterFailPoints.
func FailPointOperations() []apispec.Operation {
	return []apispec.Operation{
		{Method: http.MethodGet, Path: "/admin/failpoints", Summary: "The service's fail points, armed or not.", Answer: FailPoints{}},
		{Method: http.MethodPut, Path: "/admin/failpoints/:name", Summary: "Arm or disarm a fail point (FAILPOINTS_ENABLED).",
			Body: FailPointRequest{}, Answer: FailPointSet{}},
	}
}

// TracesOperations describe the route of RegisterTraces.
func TracesOperations() []apispec.Operation {
	return []apispec.Operation{
		{Method: http.MethodGet, Path: "/admin/traces", Summary: "The service's recent spans; with traceId, that trace's.",
			Query: []string{"traceId", "limit"}, Answer: TracesView{}},
	}
}

// OutboxOperations describe the routes of RegisterOutbox.
func OutboxOperations() []apispec.Operation {
	return []apispec.Operation{
		{Method: http.MethodGet, Path: "/admin/outbox", Summary: "The relay's backlog; with aggregateId, that aggregate's rows.",
			Query: []string{"aggregateId"}, Answer: OutboxBacklog{}},
		{Method: http.MethodGet, Path: "/admin/outbox/:eventId", Summary: "One outbox row and what the relay did with it.",
			Answer: outbox.Status{}},
		{Method: http.MethodPost, Path: "/admin/outbox/:eventId/republish", Summary: "Send an outbox row again with the same event id (X-Operator required).",
			Answer: outbox.Status{}},
	}
}

// ReconciliationOperations describe the routes of RegisterReconciliation
// and RegisterEffects for a service whose view of an order is a V.
func ReconciliationOperations[V any]() []apispec.Operation {
	return []apispec.Operation{
		{Method: http.MethodPost, Path: "/admin/reconciliation/orders", Summary: fmt.Sprintf("The service's views of up to %d orders, for reconciliation.", MaxOrderIDs),
			Body: OrderIDsRequest{}, Answer: ReconciliationViews[V]{}},
		EffectsOperation(),
	}
}

// EffectsOperation describes the route of RegisterEffects.
func EffectsOperation() apispec.Operation {
	return apispec.Operation{Method: http.MethodGet, Path: "/admin/reconciliation/effects",
		Summary: "A page of the order ids the service holds effects for.", Query: []string{"after", "before", "limit"},
		Answer: EffectOrders{}}
}
