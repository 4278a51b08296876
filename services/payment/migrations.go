package main

import "embed"

// migrations holds the payment service's own tables (payments, refunds);
// the shared outbox, inbox, version guard and DLQ tables come from pkg/.
//
//go:embed migrations/*.sql
var migrations embed.FS
