package outbox_test

import "testing/fstest"

var testFS = fstest.MapFS{"00001_orders.sql": {Data: []byte(`
-- +goose Up
CREATE TABLE orders_t (order_id TEXT PRIMARY KEY, status TEXT NOT NULL);
`)}}
