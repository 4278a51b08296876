-- +goose Up
-- Every row of one aggregate, sent or not, in relay order: the reconciliation
-- views read many orders' rows at once, the drills and GET /orders/{id}/events
-- one order's; without it each is a scan of the whole outbox.
CREATE INDEX outbox_events_aggregate ON outbox_events (aggregate_id, id);

-- +goose Down
DROP INDEX outbox_events_aggregate;
