"""Reporting: pure functions that turn results into tables, plots and audit pages.

* :mod:`~tmdlib.reporting.tables` -- mean ± CI aggregation, best/second marks, wins/fails, Markdown
  tables and curves in the paper's form.
* :mod:`~tmdlib.reporting.audit` -- the audit report of a pipeline run (Markdown and static HTML).
* :mod:`~tmdlib.reporting.verdict` -- the verdict on a run's bounds (informative or vacuous), read from
  ``metrics.json``: what the audit report and ``tmdsub summary`` open with.
* :mod:`~tmdlib.reporting.paper` -- per-dataset experiment reports and the wins summary.
"""
