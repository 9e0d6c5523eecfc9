-- Jobs: one row per job, written before execd is asked to start it. `execution_id` is
-- chosen then, for the job's current launch generation: asking execd again with it after
-- any crash answers that execution, and never starts a second one.
CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,          -- UUID v7 (time-ordered)
    owner            TEXT NOT NULL,             -- the user it runs for
    via              TEXT NOT NULL,             -- api, mcp
    spec             TEXT NOT NULL,             -- JSON: what its creator asked for
    state            TEXT NOT NULL,             -- queued, starting, awaiting_approval, running, an end
    generation       INTEGER NOT NULL,          -- its launch generation (1: the first)
    execution_id     TEXT NOT NULL,             -- that generation's execution at execd
    place            TEXT NOT NULL DEFAULT '',  -- where execd runs it, once it answered
    approval_id      TEXT NOT NULL DEFAULT '',
    exit_code        INTEGER,
    reason           TEXT NOT NULL DEFAULT '',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    attempts         INTEGER NOT NULL DEFAULT 0,  -- times execd was asked in this generation
    created_at_ms    INTEGER NOT NULL,
    started_at_ms    INTEGER NOT NULL DEFAULT 0,
    ended_at_ms      INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX jobs_by_owner ON jobs (owner, id);
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE UNIQUE INDEX jobs_by_execution ON jobs (execution_id);
CREATE INDEX jobs_by_end ON jobs (ended_at_ms) WHERE ended_at_ms > 0;
