"""Reports a renter can hold a provider to, built from a run directory (never live probes).

rundata.py      read a run directory, partial ones too, and say what is missing
measurements.py the figures of each node: identity, metrics, curves, per-GPU values
fleet.py        per-metric median and spread over the nodes; stragglers
baseline.py     what changed against an earlier run, against the profile's tolerances
model.py        the report: verdict, nodes, fleet, baseline (pydantic; the JSON summary)
plots.py        matplotlib figures as SVG text (Agg, deterministic ids, no dates)
render.py       report.html and report.md from the Jinja2 templates in bringup/templates/
junit.py        JUnit XML, one testcase per node x check
command.py      `bringup report`
"""
