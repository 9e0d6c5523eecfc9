-- Standing approvals: an admin's approval of one exact request that jobd may run for one
-- owner again and again (a task's action, approved once per version). Each run is judged
-- afresh and must hash to `digest`.
CREATE TABLE standing_approvals (
    id             TEXT PRIMARY KEY,          -- UUID v7
    label          TEXT NOT NULL,             -- what it is for
    owner          TEXT NOT NULL,             -- the principal it runs for
    requester_role TEXT NOT NULL,             -- the peer role that may use it (job)
    place          TEXT NOT NULL,             -- sandbox, inspect or host
    request        TEXT NOT NULL,             -- the canonical request (JSON)
    digest         TEXT NOT NULL,             -- its SHA-256
    risk_class     TEXT NOT NULL,
    approved_by    TEXT NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    revoked_at_ms  INTEGER NOT NULL DEFAULT 0,
    revoked_by     TEXT NOT NULL DEFAULT ''
) STRICT;
