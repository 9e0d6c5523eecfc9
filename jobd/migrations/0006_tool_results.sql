-- What a task's MCP tool call answered (mcpd's capped answer; data, never instructions),
-- one per job and generation. Removed with its job.
CREATE TABLE tool_results (
    job_id     TEXT NOT NULL,
    generation INTEGER NOT NULL,
    result     TEXT NOT NULL,              -- JSON: text, structured, is_error, truncated, server
    PRIMARY KEY (job_id, generation)
) STRICT;

CREATE TRIGGER tool_results_go_with_their_job AFTER DELETE ON jobs
BEGIN
    DELETE FROM tool_results WHERE job_id = OLD.id;
END;
