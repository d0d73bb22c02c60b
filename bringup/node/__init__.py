"""Everything that runs on a node, and the zip the controller ships over SSH.

A bare node has `python3` and the NVIDIA tools and nothing installed, so this package
imports only the standard library, its own modules, and, where a probe needs them, the
GPU libraries (pynvml; torch and DeepSpeed for the gemm, collective and burn-in work).
An import-linter contract (pyproject.toml) keeps it so.

    protocol.py   the node side: a JSON request on stdin, one JSON line per probe out
    catalog.py    the one list of probes; probes/ holds one module per probe
    parsers/      tool outputs (nvidia-smi, fio, dmon) into the facts dataclasses
    gpu_facts.py, nccl_facts.py, timeline.py   facts shared by probes and parsers
    collective/   the torch engine of the nccl probe (launcher, worker)
    burnin/       the reference fine-tune: recipe schema, corpus, trainer, FLOP accounting
    result.py, tool.py, rendezvous.py   a probe's result, running tools, ports/interfaces
"""
