-- The executions ledger: one row per launch, written before the shim starts and
-- updated when its result is read.
CREATE TABLE executions (
    id                TEXT PRIMARY KEY,          -- UUID v7 (time-ordered)
    requested_by_role TEXT NOT NULL,             -- peer role(s) of the caller
    principal         TEXT NOT NULL,             -- end user the caller asserted ('' if none)
    argv              TEXT NOT NULL,             -- JSON array
    cwd               TEXT NOT NULL,
    profile           TEXT NOT NULL,
    status            TEXT NOT NULL,             -- running, succeeded, failed, timed_out, ...
    exit_code         INTEGER,
    signal            INTEGER,
    containment       TEXT NOT NULL DEFAULT '[]',  -- JSON: dimension, state, detail
    shim_identity     TEXT,                      -- JSON: pid, start_time, boot_id
    init_identity     TEXT,
    created_at_ms     INTEGER NOT NULL,
    started_at_ms     INTEGER,
    ended_at_ms       INTEGER,
    stdout_bytes      INTEGER NOT NULL DEFAULT 0,
    stderr_bytes      INTEGER NOT NULL DEFAULT 0,
    teardown_complete INTEGER NOT NULL DEFAULT 0,
    survivors         TEXT NOT NULL DEFAULT '[]',
    error             TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX executions_by_principal ON executions (principal, id);
CREATE INDEX executions_by_status ON executions (status, id);
