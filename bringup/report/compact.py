"""What the report keeps of every node, held in a fraction of the memory.

A report of ten thousand nodes keeps every finding (300,000 at the scale benchmark's 29 a
node) and every node's records' headers (what ran, when, how it ended, where it came
from) until its outputs are written. As read, each text is a new string from its JSON
line (the node, check, action and most messages repeat across the fleet), each
expectation a new object (a check's threshold is the same on every node), and each
pydantic model carries pydantic's record of which fields its input gave: a set of the
field names, 728 bytes for eight names.

`Compact` shares them, after validation: equal texts become one string, equal frozen
values (a finding's `Expected`) one object, and a model whose input gave every field
shares one set of its class's field names. That set is safe to share: pydantic adds to it
only a field that is assigned (which it holds already), and a copy (model_copy) takes a set
of its own. A model whose input left fields out keeps its own set, so what it was given
(`model_fields_set`, `exclude_unset`) stays its own. A finding and a node's records'
headers (`NodeFacts`, `ProbeRecord`) are slotted dataclasses: they have no such set, and
their fields are swapped in place (a record's `Source`, frozen, shared as an expectation).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


class Compact:
    """Share the texts, the frozen values and the fields sets of the values passed
    through it (in place)."""

    # A cap on the texts and the frozen values remembered: a fleet whose every message is
    # its own costs at most this many entries (about 10 MB) for sharing nothing.
    TEXTS = 100_000

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._frozen: dict[tuple[Any, ...], Any] = {}
        self._shapes: dict[type, tuple[tuple[str, ...], bool]] = {}  # fields, frozen
        self._every: dict[type[BaseModel], set[str]] = {}

    def __call__(self, value: T) -> T:
        result: T = self._value(value)
        return result

    def _value(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self._text(value)
        if kind is dict:
            return {self._value(key): self._value(item) for key, item in value.items()}
        if kind is list:
            return [self._value(item) for item in value]
        if isinstance(value, BaseModel):
            self._model(value)
        elif dataclasses.is_dataclass(kind):
            return self._dataclass(value)
        return value

    def _model(self, model: BaseModel) -> None:
        fields = model.__dict__
        for name, value in fields.items():
            fields[name] = self._value(value)
        every = self._every.get(type(model))
        if every is None:
            every = self._every[type(model)] = set(type(model).model_fields)
        if model.__pydantic_fields_set__ == every:
            # As pydantic sets it, frozen models included.
            object.__setattr__(model, "__pydantic_fields_set__", every)

    def _dataclass(self, value: Any) -> Any:
        kind = type(value)
        shape = self._shapes.get(kind)
        if shape is None:
            names = tuple(f.name for f in dataclasses.fields(kind))
            shape = self._shapes[kind] = (names, kind.__dataclass_params__.frozen)
        names, frozen = shape
        values = [self._value(getattr(value, name)) for name in names]
        for name, item in zip(names, values, strict=True):
            # The same value, shared: a frozen one (an expectation) too.
            object.__setattr__(value, name, item)
        if not frozen:
            return value
        key = (kind, *((type(item), item) for item in values))
        try:
            shared = self._frozen.get(key)
        except TypeError:  # a list among its values (an expectation "one of"): its own
            return value
        if shared is not None:
            return shared
        if len(self._frozen) < self.TEXTS:
            self._frozen[key] = value
        return value

    def _text(self, text: str) -> str:
        shared = self._texts.get(text)
        if shared is not None:
            return shared
        if len(self._texts) < self.TEXTS:
            self._texts[text] = text
        return text
