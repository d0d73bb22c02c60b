"""The burn-in's token stream: packed sequences, synthetic by default or from a local JSONL.

Batch `i` of rank `r` is a pure function of (seed, rank, i), so a resumed run sees exactly
the batches it would have seen, and the restore check can replay the step after a
checkpoint. Nothing is downloaded: the JSONL path uses a byte-level tokenizer.

Synthetic documents are arithmetic progressions over a quarter of the vocabulary
(token j = (start + stride·j) mod K) with 10% of tokens replaced by noise. A model learns
them in stages (first which tokens occur, then the progression), so the loss falls from
ln(vocab) within a few steps on any healthy GPU: a loss that does not fall means the
arithmetic is wrong, not that the data is unlearnable (random tokens would be).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

IGNORE = -100  # label of tokens the loss skips (prompts), as transformers expects
EOS = 2  # end of document in the packed stream
BYTE_OFFSET = 3  # byte b is token b + 3 (0 pad, 1 bos, 2 eos)
NOISE = 0.1  # share of synthetic tokens replaced by a random token


class CorpusError(Exception):
    """The data cannot be used (unreadable JSONL, vocabulary too small); one line."""


@dataclass
class Batch:
    input_ids: torch.Tensor  # [micro_batch, seq_len], int64
    labels: torch.Tensor  # same shape; IGNORE where no loss is taken


def _generator(seed: int, rank: int, index: int) -> torch.Generator:
    # A distinct, reproducible stream per (seed, rank, batch index).
    return torch.Generator().manual_seed((seed * 1_000_003 + rank) * 1_000_003 + index)


class SyntheticCorpus:
    """Packed arithmetic-progression documents (see the module docstring)."""

    def __init__(self, vocab_size: int, seq_len: int, micro_batch: int, seed: int) -> None:
        if vocab_size < 16:
            raise CorpusError(f"synthetic data needs a vocabulary of 16 or more, not {vocab_size}")
        self.symbols = max(8, vocab_size // 4)  # K: tokens BYTE_OFFSET .. BYTE_OFFSET + K - 1
        self.seq_len, self.micro_batch, self.seed = seq_len, micro_batch, seed

    def batch(self, rank: int, index: int) -> Batch:
        g = _generator(self.seed, rank, index)
        rows = [self._row(g) for _ in range(self.micro_batch)]
        ids = torch.stack(rows)
        return Batch(input_ids=ids, labels=ids.clone())

    def _row(self, g: torch.Generator) -> torch.Tensor:
        t, k = self.seq_len, self.symbols
        # Document boundaries: lengths between 16 and seq_len / 2 (at least 16 tokens).
        longest = max(17, t // 2)
        lengths = torch.randint(16, longest, (t // 16 + 1,), generator=g)
        starts = torch.cumsum(lengths, 0) - lengths
        doc = torch.searchsorted(starts, torch.arange(t), right=True) - 1  # document of each
        pos = torch.arange(t) - starts[doc]  # position within its document
        first = torch.randint(0, k, (len(lengths),), generator=g)
        stride = torch.randint(1, 8, (len(lengths),), generator=g)
        tokens = (first[doc] + stride[doc] * pos) % k + BYTE_OFFSET
        noise = torch.rand(t, generator=g) < NOISE
        tokens = torch.where(noise, torch.randint(0, k, (t,), generator=g) + BYTE_OFFSET, tokens)
        return torch.where(pos == 0, torch.full_like(tokens, EOS), tokens)


class JsonlCorpus:
    """Prompt/response pairs from a local JSONL, byte-tokenized and packed into sequences.

    The loss is taken on the responses only (prompt tokens are labelled IGNORE).
    """

    def __init__(
        self, path: Path, vocab_size: int, seq_len: int, micro_batch: int, seed: int
    ) -> None:
        if vocab_size < BYTE_OFFSET + 256:
            raise CorpusError(f"byte-level JSONL data needs vocab_size >= 259, not {vocab_size}")
        ids, labels = self._tokens(path)
        rows = len(ids) // seq_len
        if rows == 0:
            raise CorpusError(f"{path}: {len(ids)} tokens, fewer than one sequence of {seq_len}")
        self.ids = torch.tensor(ids[: rows * seq_len]).view(rows, seq_len)
        self.labels = torch.tensor(labels[: rows * seq_len]).view(rows, seq_len)
        self.micro_batch, self.seed = micro_batch, seed

    @staticmethod
    def _tokens(path: Path) -> tuple[list[int], list[int]]:
        ids: list[int] = []
        labels: list[int] = []
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise CorpusError(f"cannot read {path}: {exc}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                pair = json.loads(line)
                prompt, response = str(pair["prompt"]), str(pair["response"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise CorpusError(
                    f'{path}:{number}: expected {{"prompt": ..., "response": ...}}'
                ) from None
            p = [b + BYTE_OFFSET for b in prompt.encode()]
            r = [b + BYTE_OFFSET for b in response.encode()] + [EOS]
            ids += p + r
            labels += [IGNORE] * len(p) + r
        return ids, labels

    def batch(self, rank: int, index: int) -> Batch:
        g = _generator(self.seed, rank, index)
        rows = torch.randint(0, len(self.ids), (self.micro_batch,), generator=g)
        return Batch(input_ids=self.ids[rows], labels=self.labels[rows])
