"""How a typed agent event becomes a record (the ``data`` of an ``AgentEvent``, the fields of an
episode-log line after ``t`` and ``kind``) and back again.

Every kind is a frozen dataclass derived from :class:`TypedEvent`, registered under its kind
(the ``kind=`` of its class statement).  :meth:`TypedEvent.to_record` writes its fields in
declaration order, under their own names; a field declared with :func:`optional` is left out
until it is given (it holds :data:`ABSENT`), because some emitters write that key only
sometimes and a record must read as it always has.
:func:`parse` reads a record back: a missing key takes the field's default and a kind nobody
registered (an old or a newer file, a skill's own event) becomes a :class:`GenericEvent` that
keeps its data, so a reader never fails on a kind it does not know.

A record read back is taken as written: its values are not checked against the field types
(a malformed line must still be shown), so whoever computes with a field guards it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

# every kind's type, by its kind (filled as the kinds' classes are defined)
REGISTRY: dict[str, type[TypedEvent]] = {}


class Absent(enum.Enum):
    """The value of a field its emitter left out (its key is absent from the record; ``None``
    is a value, written as ``null``).  False in a test, like an empty value."""

    ABSENT = "absent"

    def __bool__(self) -> bool:
        return False


ABSENT = Absent.ABSENT


def optional() -> Any:
    """A field its emitter may leave out: absent (:data:`ABSENT`) unless given."""
    return dataclasses.field(default=ABSENT)


def empty_map() -> Any:
    """A mapping field, empty by default."""
    return dataclasses.field(default_factory=dict)


def empty_list() -> Any:
    """A list field, empty by default."""
    return dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class TypedEvent:
    """One agent event of a known kind; ``KIND`` names it on the wire."""

    KIND: ClassVar[str] = ""

    def __init_subclass__(cls, kind: str = "", **kw: Any) -> None:
        # ``class RunEnded(TypedEvent, kind="run_ended")`` registers the type of a kind
        super().__init_subclass__(**kw)
        if kind:
            if kind in REGISTRY:
                raise ValueError(f"event kind {kind!r} registered twice")
            cls.KIND = kind
            REGISTRY[kind] = cls

    @property
    def kind(self) -> str:
        return self.KIND

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not ABSENT:
                out[f.name] = v
        return out

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> TypedEvent:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class GenericEvent(TypedEvent):
    """An event of a kind with no type of its own (a skill's, a newer file's): its kind and
    data as they came."""

    name: str = ""
    data: Mapping[str, Any] = empty_map()

    @property
    def kind(self) -> str:
        return self.name

    def to_record(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class SpreadEvent(TypedEvent):
    """A kind whose record ends with keys of the emitter's choosing (``extra``): they are
    written beside the named fields and read back into ``extra``."""

    extra: Mapping[str, Any] = empty_map()

    def to_record(self) -> dict[str, Any]:
        out = super().to_record()
        del out["extra"]
        out.update(self.extra)
        return out

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> TypedEvent:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in data.items() if k in names},
                   extra={k: v for k, v in data.items() if k not in names})


def parse(name: str, data: Mapping[str, Any]) -> TypedEvent:
    """The typed event for a record of kind ``name`` (a :class:`GenericEvent` when the kind has
    no type, or the record does not fit it).  Never raises."""
    cls = REGISTRY.get(name)
    if cls is not None:
        try:
            return cls.from_record(data)
        except Exception:  # a record that does not fit its type is still shown
            pass
    return GenericEvent(name=name, data=dict(data))


__all__ = ["ABSENT", "REGISTRY", "Absent", "GenericEvent", "SpreadEvent", "TypedEvent",
           "empty_list", "empty_map", "optional", "parse"]
