-- Follow-ups when a job ends: what a job (or a task, for each of its runs) asks for, and
-- each follow-up recorded once per (job, generation, kind, target) before the job is
-- marked followed up. A webhook's delivery id is its row's id: the same on every retry.
ALTER TABLE jobs ADD COLUMN followups TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN followed_up INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN chained_from TEXT NOT NULL DEFAULT '';
-- One chained run per (run, edge), however often it is looked at.
CREATE UNIQUE INDEX jobs_by_chain ON jobs (task_id, chained_from) WHERE trigger = 'chain';
CREATE INDEX jobs_to_follow_up ON jobs (id) WHERE followed_up = 0 AND ended_at_ms > 0;
ALTER TABLE tasks ADD COLUMN followups TEXT NOT NULL DEFAULT '';

CREATE TABLE followups (
    id                 TEXT PRIMARY KEY,            -- UUID v7; a webhook's delivery id
    job_id             TEXT NOT NULL,
    generation         INTEGER NOT NULL,
    owner              TEXT NOT NULL,
    kind               TEXT NOT NULL,               -- webhook, chain
    target             TEXT NOT NULL,               -- the URL, or the chained task's id
    state              TEXT NOT NULL,               -- pending, delivered, dead, terminal_unfollowable
    attempts           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at_ms INTEGER NOT NULL,
    last_error         TEXT NOT NULL DEFAULT '',
    created_at_ms      INTEGER NOT NULL,
    delivered_at_ms    INTEGER NOT NULL DEFAULT 0,
    UNIQUE (job_id, generation, kind, target)
) STRICT;
CREATE INDEX followups_due ON followups (next_attempt_at_ms) WHERE state = 'pending';
CREATE INDEX followups_by_owner ON followups (owner, id);

CREATE TABLE delivery_attempts (
    followup_id TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    at_ms       INTEGER NOT NULL,
    status      INTEGER NOT NULL DEFAULT 0,   -- the receiver's HTTP status (0: none)
    error       TEXT NOT NULL DEFAULT '',
    duration_ms INTEGER NOT NULL,
    PRIMARY KEY (followup_id, attempt)
) STRICT;

-- Each owner's signing secret for webhook deliveries, sealed under jobd's key.
CREATE TABLE delivery_secrets (
    owner         TEXT PRIMARY KEY,
    sealed        TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
) STRICT;
