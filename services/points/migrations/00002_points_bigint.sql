-- +goose Up
-- An order may be worth up to 9999999999999999 points (the largest amount
-- the contract allows, one point per whole unit): more than INT holds.
ALTER TABLE points_ledger ALTER COLUMN points TYPE BIGINT;

-- +goose Down
ALTER TABLE points_ledger ALTER COLUMN points TYPE INT;
