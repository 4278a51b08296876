package reconciliation

import "fmt"

// OrderVersionRegressed: a consumer has applied a later version of the
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
// Nothing is repaired automatically: the order's state went back with its
// version, the consumers hold the later states, and an event emitted from
// the restored state would be applied from a state the consumer has left.
// A person settles the order's state from the other services' records
// and raises its version past the highest one any consumer applied; the
// finding names both.
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
			Action: manual(fmt.Sprintf("the order service lost changes %d..%d of the order (database restored from an earlier backup?) "+
				"and its next events would be ignored as stale: settle the order's state from the other services' records, "+
				"then raise its version past %d, the highest any consumer applied", order.Version+1, c.Version, highest))})
	}
	return out
}
