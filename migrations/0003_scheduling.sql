-- Scheduling state: a requeued run's earliest next start (backoff after a lost attempt), the
-- run's experiment-wide concurrency cap (resources.max_concurrent; 0 = none), and whether an
-- experiment is paused (its queued runs are not started).

ALTER TABLE runs ADD COLUMN not_before REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN max_concurrent INTEGER NOT NULL DEFAULT 0;
ALTER TABLE experiments ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
