-- The columns a report and a page of runs read, in an index of their own: a 10,000-run study's
-- rows carry their configs (~1.3 KB each), and reading those pages for every metric of a report
-- took most of its time. Ordered by id within an experiment, so no query sorts.
CREATE INDEX runs_listing ON runs (experiment_id, id, variant, seed, state, attempt, confirm);
