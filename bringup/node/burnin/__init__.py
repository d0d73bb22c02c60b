"""The burn-in: a reference LoRA fine-tune under DeepSpeed that records a node's baseline.

    recipe.py    the recipe schema (dataclasses; the controller validates YAML into them)
    corpus.py    the token stream: synthetic (learnable) or a local JSONL, packed
    flops.py     FLOPs per token, MFU and HFU of a recipe's shape (pure)
    trainer.py   one rank of the fine-tune (launched by torch.distributed.run)

The probe `burnin` (bringup/node/probes/burnin.py) launches the trainer on a node and turns
its outputs into facts; bringup/checks/burnin.py judges them. See docs/burnin.md.
"""
