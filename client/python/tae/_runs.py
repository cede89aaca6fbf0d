"""The runs of an experiment as columns (taed's GET /api/experiments/ID/runs?form=columns): what
runs() makes its frame of, without a dict per run. A table:
  columns        {field: [value per run]}: id, variant, seed, state, attempt, agent, ...
  final_metrics  {metric: [value per run]} (None where a run has none, or its value is null)
  final_null     [(row, metric)]: a final metric a run has as null (NaN or inf: diverged)
  configs        [config dict]: each variant's (a bundle's: each run's own)
  config_ref     [per run: its index in configs]
  config_diff    [(row, key, value)]: where a run's config differs from configs[config_ref[row]]
  config_absent  [(row, key)]: keys of its base that a run's config lacks
  rows           the number of runs"""


def empty():
    return {"columns": {}, "final_metrics": {}, "final_null": [], "configs": [], "config_ref": [],
            "config_diff": [], "config_absent": [], "rows": 0}


def _extend(into, more, rows_before, rows_more):
    """Appends the {field: [values]} `more` of `rows_more` runs to `into` of `rows_before`."""
    for key in dict.fromkeys(list(into) + list(more)):  # first appearance first
        into.setdefault(key, [None] * rows_before).extend(more.get(key) or [None] * rows_more)


def append(table, page):
    """Adds a page (taed's answer, or one made by of_records) to `table`; returns it."""
    rows = table["rows"]
    n = int(page.get("rows", 0))
    _extend(table["columns"], page.get("columns") or {}, rows, n)
    _extend(table["final_metrics"], page.get("final_metrics") or {}, rows, n)
    base = len(table["configs"])
    table["configs"].extend(page.get("configs") or [])
    table["config_ref"].extend(base + int(r) for r in page.get("config_ref") or [])
    table["config_diff"].extend((rows + int(r), k, v) for r, k, v in page.get("config_diff") or [])
    table["config_absent"].extend((rows + int(r), k) for r, k in page.get("config_absent") or [])
    table["final_null"].extend((rows + int(r), k) for r, k in page.get("final_null") or [])
    table["rows"] = rows + n
    return table


def of_records(records):
    """The table of run records as GET .../runs (and a bundle's runs.json) has them."""
    fields = list(dict.fromkeys(k for r in records for k in r
                                if k not in ("config", "final_metrics")))
    metrics = list(dict.fromkeys(k for r in records for k in (r.get("final_metrics") or {})))
    return append(empty(), {
        "columns": {f: [r.get(f) for r in records] for f in fields},
        "final_metrics": {m: [(r.get("final_metrics") or {}).get(m) for r in records]
                          for m in metrics},
        "configs": [r.get("config") or {} for r in records],
        "config_ref": list(range(len(records))),
        "final_null": [[i, k] for i, r in enumerate(records)
                       for k, v in (r.get("final_metrics") or {}).items() if v is None],
        "rows": len(records)})
