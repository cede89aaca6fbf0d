-- Blame that matches the cause (docs/reliability.md).
-- A gang whose rank failed waits before blaming the job: a host of it lost, preempted or
-- interrupted within the window makes the failure the worker's (server/lifecycle OnGangExit).
-- The first failure of the attempt, its exit code and when it came are kept until then.
ALTER TABLE runs ADD COLUMN gang_failure TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN gang_failure_code INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN gang_failure_at REAL NOT NULL DEFAULT 0;
-- resources.max_disk: bytes a run may write into its directories on a worker; 0: no limit.
ALTER TABLE runs ADD COLUMN max_disk INTEGER NOT NULL DEFAULT 0;
-- The worker's faults in a row among an agent's run exits: kept across its reconnects and
-- taed's restarts, so a flapping agent is quarantined like a steady one.
ALTER TABLE agents ADD COLUMN infra_faults INTEGER NOT NULL DEFAULT 0;
