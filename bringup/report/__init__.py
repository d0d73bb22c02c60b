"""Reports a renter can hold a provider to, built from a run directory (never live probes).

The report judges nothing: it shows the run's facts (through bringup/measurements.py) and
findings, with the findings of the whole run that bringup/checks judged for it
(completeness.py, stragglers.py, regression.py), handed in by bringup/commands/report.py.

rundata.py      read a run directory, partial ones too, and record what could not be read
statistics.py   per-metric median and spread over the nodes; the stragglers found
compare.py      what changed against an earlier run; the regressions found
model.py        the report: verdict, nodes, fleet, baseline (pydantic; the JSON summary)
plots.py        matplotlib figures as SVG text (Agg, deterministic ids, no dates)
render.py       report.html and report.md from the Jinja2 templates in bringup/templates/
junit.py        JUnit XML, one testcase per node x check
escape.py       node text made safe for each output (console, Markdown, XML, plots)
prometheus.py   the same report as Prometheus metrics (`bringup exporter`)
"""
