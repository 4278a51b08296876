package main

import "embed"

// migrations creates the shipping tables (shipments, shipment_events); the
// shared tables come from pkg.
//
//go:embed migrations/*.sql
var migrations embed.FS
