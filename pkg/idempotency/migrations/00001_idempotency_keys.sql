-- +goose Up
-- One row per Idempotency-Key a client sent to a state-changing route of
-- the service: the request it stood for (fingerprint), whether that is
-- still running, and once done the answer every retry with the key gets.
CREATE TABLE idempotency_keys (
    scope           TEXT        NOT NULL,
    idempotency_key TEXT        NOT NULL,
    fingerprint     TEXT        NOT NULL,
    owner           UUID        NOT NULL,
    state           TEXT        NOT NULL CHECK (state IN ('RUNNING', 'DONE')),
    status          INT,
    content_type    TEXT,
    body            BYTEA,
    created_at      TIMESTAMPTZ NOT NULL,
    locked_until    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (scope, idempotency_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
