-- Runs once, when the compose Postgres volume is new: one database per
-- service (DB_NAME). Each service migrates its own database at start.
CREATE DATABASE orders;
CREATE DATABASE payments;
CREATE DATABASE inventory;
CREATE DATABASE points;
CREATE DATABASE notifications;
CREATE DATABASE reconciliation;
