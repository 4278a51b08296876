-- +goose Up
-- Every reconciliation run: who or what started it, over which orders, and
-- how it ended.
CREATE TABLE reconciliation_runs (
    id          BIGSERIAL   PRIMARY KEY,
    started_by  TEXT        NOT NULL,
    -- The orders asked for; empty: every order older than min_age.
    order_ids   TEXT[]      NOT NULL DEFAULT '{}',
    min_age_ms  BIGINT      NOT NULL CHECK (min_age_ms >= 0),
    status      TEXT        NOT NULL CHECK (status IN ('RUNNING', 'SUCCEEDED', 'FAILED')),
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ,
    checked     INT         NOT NULL DEFAULT 0,
    findings    INT         NOT NULL DEFAULT 0,
    actions     INT         NOT NULL DEFAULT 0,
    error       TEXT        NOT NULL DEFAULT ''
);

-- Every finding of every run, with the action decided and what became of it.
CREATE TABLE reconciliation_findings (
    id          BIGSERIAL   PRIMARY KEY,
    run_id      BIGINT      NOT NULL REFERENCES reconciliation_runs (id),
    order_id    TEXT        NOT NULL,
    kind        TEXT        NOT NULL,
    service     TEXT        NOT NULL,
    expected    TEXT        NOT NULL,
    actual      TEXT        NOT NULL,
    action      TEXT        NOT NULL,
    action_key  TEXT        NOT NULL DEFAULT '',
    outcome     TEXT        NOT NULL,
    detected_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX reconciliation_findings_run ON reconciliation_findings (run_id, id);
CREATE INDEX reconciliation_findings_order ON reconciliation_findings (order_id, id);

-- Every compensation taken, once per key: a second run over the same facts,
-- or two runs at once, find the key taken and take no second action.
CREATE TABLE reconciliation_actions (
    action_key   TEXT        PRIMARY KEY,
    run_id       BIGINT      NOT NULL REFERENCES reconciliation_runs (id),
    order_id     TEXT        NOT NULL,
    service      TEXT        NOT NULL,
    action       TEXT        NOT NULL,
    status       TEXT        NOT NULL CHECK (status IN ('IN_PROGRESS', 'DONE', 'FAILED')),
    outcome      TEXT        NOT NULL DEFAULT '',
    attempts     INT         NOT NULL DEFAULT 1,
    requested_by TEXT        NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at  TIMESTAMPTZ
);

-- The convergence monitor's orders: each order's latest version, when it
-- changed, and when every service had caught up with it.
CREATE TABLE convergence_watch (
    order_id     TEXT        PRIMARY KEY,
    version      BIGINT      NOT NULL,
    changed_at   TIMESTAMPTZ NOT NULL,
    converged_at TIMESTAMPTZ,
    -- When the monitor last compared it: each look checks the orders it
    -- checked longest ago, so a backlog of unconverged orders is checked
    -- in turn, at a bounded cost per look.
    checked_at   TIMESTAMPTZ
);
CREATE INDEX convergence_watch_open ON convergence_watch (checked_at NULLS FIRST, changed_at) WHERE converged_at IS NULL;
CREATE INDEX convergence_watch_past ON convergence_watch (changed_at) WHERE converged_at IS NULL;

-- How far the monitor has read the order service's changes.
CREATE TABLE convergence_cursor (
    id            INT         PRIMARY KEY CHECK (id = 1),
    changed_after TIMESTAMPTZ NOT NULL,
    after_id      TEXT        NOT NULL
);

-- +goose Down
DROP TABLE convergence_cursor;
DROP TABLE convergence_watch;
DROP TABLE reconciliation_actions;
DROP TABLE reconciliation_findings;
DROP TABLE reconciliation_runs;
