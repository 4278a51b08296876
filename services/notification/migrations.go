package main

import "embed"

// migrations creates the notifications table; the shared tables come from
// pkg.
//
//go:embed migrations/*.sql
var migrations embed.FS
