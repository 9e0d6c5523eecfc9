-- Tasks: a command (the action) run by its schedule or when asked, as its owner, only in
-- a version an admin approved (execd's standing approval of that exact action).
CREATE TABLE tasks (
    id                   TEXT PRIMARY KEY,            -- UUID v7
    owner                TEXT NOT NULL,
    name                 TEXT NOT NULL,
    version              INTEGER NOT NULL,            -- each save makes a new one
    spec                 TEXT NOT NULL,               -- JSON: the action, as a job's spec
    schedule             TEXT,                        -- JSON, or NULL: runs only when asked
    paused               INTEGER NOT NULL DEFAULT 0,
    approved_version     INTEGER NOT NULL DEFAULT 0,  -- 0: none
    approved_by          TEXT NOT NULL DEFAULT '',
    approved_at_ms       INTEGER NOT NULL DEFAULT 0,
    standing_approval_id TEXT NOT NULL DEFAULT '',
    approved_place       TEXT NOT NULL DEFAULT '',    -- where execd's approval runs it
    cursor_ms            INTEGER NOT NULL,            -- the schedule's fires up to here are handled
    next_run_at_ms       INTEGER NOT NULL DEFAULT 0,  -- 0: nothing scheduled
    created_at_ms        INTEGER NOT NULL,
    updated_at_ms        INTEGER NOT NULL
) STRICT;

CREATE INDEX tasks_by_owner ON tasks (owner, id);
CREATE INDEX tasks_by_next_run ON tasks (next_run_at_ms) WHERE next_run_at_ms > 0;

-- A job may be a run of a task: which version, what started it, when it was due, the
-- standing approval it runs under, and (overlap `queue`) the run it waits for.
ALTER TABLE jobs ADD COLUMN task_id TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN task_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN trigger TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN scheduled_for_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN standing_approval_id TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN after_job TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_by_task ON jobs (task_id, id) WHERE task_id != '';
-- One run per fire of a schedule, however often the scheduler is interrupted.
CREATE UNIQUE INDEX jobs_by_fire ON jobs (task_id, scheduled_for_ms) WHERE trigger = 'schedule';
