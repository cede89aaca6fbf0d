-- One metric's packs of every run of an ended experiment, in run order, as one file beside the
-- database (server/store/column_file.h): the curve or history of that metric reads it in order
-- instead of one pack per run scattered among the other metrics' (on a cold page cache, 10,000
-- random reads). Derived data: a row is dropped when the experiment gets a run, a run is queued
-- again or a point of the metric arrives, and the file is then never read; taed writes it again
-- when the experiment has ended again. `generation` is in the file's header and `bytes` is its
-- size: a file that is not the one this row names is not read.
CREATE TABLE metric_columns (
  experiment_id INTEGER NOT NULL,
  key_id INTEGER NOT NULL,
  generation INTEGER NOT NULL,
  runs INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (experiment_id, key_id)
) STRICT;
