-- Monitoring counts executions per (status, profile) at every scrape: an index holding
-- both makes that a scan of the index, not of the table.
CREATE INDEX executions_by_status_profile ON executions (status, profile);
