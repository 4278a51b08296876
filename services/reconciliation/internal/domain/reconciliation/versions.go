package reconciliation

import "fmt"

// OrderVersionRegressed means a consumer has applied a later version of the
// order than the order service holds. The order service's record lost
// changes (its database restored from an earlier backup, or commits
// lost), so the events it emits next reuse versions the consumer has
// already applied, and the consumer ignores them as stale.
const OrderVersionRegressed Kind = "ORDER_VERSION_REGRESSED"

// consumerState returns the version guard of service in the facts.
func (f Facts) consumerState(service string) ConsumerState {
	switch service {
	case ServicePayment:
		return f.Payment.Consumer
	case ServiceInventory:
		return f.Inventory.Consumer
	case ServicePoints:
		return f.Points.Consumer
	case ServiceNotification:
		return f.Notifications.Consumer
	}
	return ConsumerState{}
}

// VersionRegressions reports each consumer whose version guard, as seen
// in seen, stands past the order's version in order. order must have been
// read after seen: an order's version only grows, so a consumer read
// earlier can never be ahead of it unless the order service went back.
// Reading them the other way round would take an order that moved on
// between the two reads for a regression.
//
// Each finding's action is the version fence (docs/decisions.md, A
// restore is fenced): the order service raises the order's version to the
// highest any consumer applied, so its next change gets the version after
// it and reaches every consumer instead of being ignored as stale. The
// findings of one order share the fence's key, so it is taken once. The
// fence repairs the versions only: the changes the order service lost
// stay lost, and once the order is fenced the next run compares it
// anew and names what they leave (a refund the payment service holds and
// the order does not, say) for a person.
func VersionRegressions(order Order, seen Facts) []Finding {
	if !order.Found {
		return nil
	}
	var highest int64
	for _, service := range Consumers() {
		highest = max(highest, seen.consumerState(service).Version)
	}
	var out []Finding
	for _, service := range Consumers() {
		c := seen.consumerState(service)
		if c.Version <= order.Version {
			continue
		}
		out = append(out, Finding{OrderID: order.ID, Kind: OrderVersionRegressed, Service: service,
			Expected: fmt.Sprintf("order at version %d or later (%s applied version %d, state %s)", c.Version, service, c.Version, c.State),
			Actual:   fmt.Sprintf("order at version %d (%s)", order.Version, order.Status),
			Action:   Fence(order, highest)})
	}
	return out
}

// Fence is the action that raises order's version to atLeast. Its key
// names the order, the version it went back to and the one it is raised
// to: one fence per regression, however many consumers and runs see it.
func Fence(order Order, atLeast int64) Action {
	return Action{Type: ActionFence, Service: ServiceOrder, AtLeast: atLeast,
		Key: fmt.Sprintf("%s:%s:%s:v%d:v%d", ActionFence, ServiceOrder, order.ID, order.Version, atLeast),
		Reason: fmt.Sprintf("the order service lost changes %d..%d of the order (database restored from an earlier backup?); "+
			"its next events would reuse versions its consumers have applied and be ignored as stale", order.Version+1, atLeast)}
}
