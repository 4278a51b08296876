-- +goose Up
-- The writer wakes the relay after its commit (Relay.Wake) instead of a
-- trigger: Postgres serialises the commits of every transaction that
-- notifies, across the whole server, on one lock held through the commit's
-- WAL flush, and under load the services' transactions queue on it.
DROP TRIGGER outbox_events_notify ON outbox_events;
DROP FUNCTION outbox_events_notify();

-- +goose Down
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
