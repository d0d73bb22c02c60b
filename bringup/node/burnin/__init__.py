"""The burn-in: a reference LoRA fine-tune under DeepSpeed that records a node's baseline.

    corpus.py    the token stream: synthetic (learnable) or a local JSONL, packed
    trainer.py   one rank of the fine-tune (launched by torch.distributed.run)
    node_recipe.py  the recipe as the node reads it (plain JSON, no pydantic on nodes)
    nodes.py     many nodes: each on its own or one joint job (judgement, pure)
    command.py   `bringup burnin`: run it on nodes, judge it, write the baseline

The probe `burnin` (bringup/node/probes/burnin.py) launches the trainer on a node and turns
its outputs into facts; bringup/checks/burnin.py judges them. See docs/burnin.md.
"""
