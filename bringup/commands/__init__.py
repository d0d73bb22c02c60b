"""The commands of the `bringup` CLI, one module each; app.py assembles them.

common.py holds what every command shares (options, `fail`, loaders, the nodes to run
on), show.py how findings look on a terminal. A command parses and prints; it reaches
nodes through bringup.fleet and leaves judgement to bringup.checks.
"""
