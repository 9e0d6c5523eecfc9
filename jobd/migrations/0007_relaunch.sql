-- A job launched again is a new generation of the same job: a chain edge starts once per
-- generation of the run it follows.
ALTER TABLE jobs ADD COLUMN chained_generation INTEGER NOT NULL DEFAULT 1;

DROP INDEX jobs_by_chain;
CREATE UNIQUE INDEX jobs_by_chain ON jobs (task_id, chained_from, chained_generation)
    WHERE trigger = 'chain';
