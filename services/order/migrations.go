package main

import "embed"

// migrations holds the order service's own tables (orders,
// processed_callbacks); the shared outbox table comes from pkg/outbox.
//
//go:embed migrations/*.sql
var migrations embed.FS
