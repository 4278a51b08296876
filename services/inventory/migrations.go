package main

import "embed"

// migrations creates the inventory tables (stock, inventory_orders,
// stock_movements); the shared tables come from pkg.
//
//go:embed migrations/*.sql
var migrations embed.FS
