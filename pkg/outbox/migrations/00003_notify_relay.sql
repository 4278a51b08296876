-- +goose Up
-- Every insert into the outbox notifies the channel outbox_events when its
-- transaction commits (never before, never on a rollback; Postgres sends one
-- notification per transaction however many rows it inserted). A relay that
-- listens wakes at once instead of at its next poll, so an event leaves
-- milliseconds after its commit; polling stays the safety net.
-- +goose StatementBegin
CREATE FUNCTION outbox_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox_events', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_notify();

-- +goose Down
DROP TRIGGER outbox_events_notify ON outbox_events;
DROP FUNCTION outbox_events_notify();
