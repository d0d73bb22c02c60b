"""The torch engine of the `nccl` probe: our own nccl-tests, on torch.distributed.

It runs where nccl-tests is absent, across nodes, and on CPU with gloo (which is how the
tests run it for real). Two processes, one module each:

    launcher.py  the probe's process, standard library only: starts one worker per rank of
                 this node, watches them under a deadline, turns their lines into NcclFacts
    worker.py    one rank (`python -m bringup.node.collective.worker PLAN_JSON`), imports
                 torch: the size sweep, timed, checked, one JSON line per size
    measure.py   what both agree on (pure): the plan, the sizes, buffers and bus factors
"""
