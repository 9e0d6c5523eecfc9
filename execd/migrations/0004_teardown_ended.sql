-- What a command left running when it ended (a daemon started with `nohup … &`), which
-- teardown then ended: a JSON list of "comm (pid N)".
ALTER TABLE executions ADD COLUMN ended_by_teardown TEXT NOT NULL DEFAULT '[]';
