"""Node-side probes: collect facts, never judge.

Everything under this package runs on a bare node with python3 (3.10+) and, for the GPU
probe, pynvml: standard library only otherwise, so the controller can ship it as one zip.
"""
