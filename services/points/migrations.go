package main

import "embed"

// migrations creates the points ledger; the shared tables come from pkg.
//
//go:embed migrations/*.sql
var migrations embed.FS
