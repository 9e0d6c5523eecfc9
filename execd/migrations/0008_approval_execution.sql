-- An execution's approval is found by the execution: a caller that chose the execution's
-- id asks again with it, and a withdrawal starts from the execution.
CREATE INDEX approvals_by_execution ON approvals (execution_id);

-- A request whose requester chose its execution's id (a job) keeps its own approval: two
-- jobs with the same command are two executions, each approved on its own. Only the
-- others are one pending approval per request and requester.
ALTER TABLE approvals ADD COLUMN own_execution INTEGER NOT NULL DEFAULT 0;
DROP INDEX approvals_pending;
CREATE UNIQUE INDEX approvals_pending ON approvals (digest, requester_role, requester_principal)
    WHERE state = 'pending' AND own_execution = 0;
