package reconciliation

// OrphanEffect means a service holds effects (a payment, a stock record, ledger
// entries, notifications) for an order the order service does not know.
// Effects follow their order, so either the order service lost the order
// (its database restored from a backup taken before the order), or the
// events came from somewhere else than the order service (a drill or a
// benchmark publishing synthetic orders straight to the broker).
const OrphanEffect Kind = "ORPHAN_EFFECT"

// Orphan is the finding of service's effects for orderID, unknown to the
// order service. Its action is a person's: refunding an orphan payment
// would refund a real customer whose order the order service lost, and
// undoing a deduction or a ledger entry would do the same to goods and
// points; which of the two causes it is, only a person can tell.
func Orphan(service, orderID string) Finding {
	return Finding{OrderID: orderID, Kind: OrphanEffect, Service: service,
		Expected: "an order the order service knows", Actual: "no such order at the order service",
		Action: manual("effects for an order the order service does not know: restore the order from a backup " +
			"or the other services' records, or, for a drill's or a benchmark's synthetic order, remove its rows")}
}

// Orphans returns the ORPHAN_EFFECT finding of each service that holds
// effects in f of an order the order service does not know (f.Order not
// found): what a run over orders named by id reports for one the order
// service lost, as a run over every order does from the services' lists
// of the orders they hold effects for.
func Orphans(f Facts) []Finding {
	if f.Order.Found {
		return nil
	}
	holds := map[string]bool{
		ServicePayment:      f.Payment.Found,
		ServiceInventory:    f.Inventory.Status != "" && f.Inventory.Status != InventoryNone,
		ServicePoints:       len(f.Points.Entries) > 0,
		ServiceNotification: len(f.Notifications.Sent) > 0,
	}
	var out []Finding
	for _, service := range Consumers() {
		if holds[service] {
			out = append(out, Orphan(service, f.Order.ID))
		}
	}
	return out
}
