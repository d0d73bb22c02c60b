"""Tool outputs into facts: one module per format, each with `detect` and a parser.

The gpu probe falls back on them where NVML is missing, and `bringup inspect` reads a log
someone sent through the same code, so both are judged alike.
"""
