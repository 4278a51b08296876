package main

import "embed"

// migrations holds reconciliation's audit tables and the convergence
// monitor's state.
//
//go:embed migrations/*.sql
var migrations embed.FS
