"""Reporting: pure functions that turn results into tables, plots and audit pages.

* :mod:`~tmdlib.reporting.tables` -- mean ± CI aggregation, best/second marks, wins/fails, Markdown
  tables and curves in the paper's form.
* :mod:`~tmdlib.reporting.audit` -- the audit report of a pipeline run (Markdown and static HTML).
* :mod:`~tmdlib.reporting.paper` -- per-dataset experiment reports and the wins summary.
"""
