-- Adaptive seeds add runs to an experiment after submit (server/seeds). A variant's seed is its
-- identity in the table: one run per (experiment, variant, seed), whoever adds it and however
-- often taed restarts. Specs never listed a seed twice (the parser refuses it), so no stored
-- experiment violates it.
CREATE UNIQUE INDEX runs_by_variant_seed ON runs(experiment_id, variant, seed);
