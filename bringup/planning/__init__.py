"""`bringup plan`: the memory, time and cost of a fine-tune, from a model's shape and a
measured burn-in baseline. Pure arithmetic over what the other data modules load (recipes,
profiles, baselines); nothing here reads a run directory or prints. docs/plan.md gives
every formula, docs/reference.md#memory-and-time-model their sources.

models.py       the model to plan: a recipe's shape, or a transformers config.json
memory.py       bytes per GPU (weights, gradients, optimizer state, activations); fits or not
throughput.py   which MFU the time rests on (measured, nearest measured, assumed); the
                time, and the ZeRO traffic at the profile's NCCL floor
plan.py         the whole plan: memory and what would make it fit, time, cost, and the
                check of the model against the baseline's own measurement
"""
