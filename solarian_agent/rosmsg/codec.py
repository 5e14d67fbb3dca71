"""Codecs: a ROS type name (``"sensor_msgs/msg/Image"``, ``"solarian_agent/action/Skill_Goal"``)
resolved to its message class, and instances built with numeric arrays coerced to what that
flavour of class wants -- :func:`rosbags_codec` here (the classes ``rosbags`` builds from the
package's interface files; the bag writer and the tests) and ``rclpy_codec`` in
``solarian_agent.ros.codec`` (the classes rosidl generates; only inside the node shells)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.text import clean


class ConvertError(ValueError):
    """A message that cannot be converted; the text names the type and the field."""


# ------------------------------------------------------------------------------------------
# codecs
# ------------------------------------------------------------------------------------------
NP_DTYPES = {
    "float64": np.float64, "double": np.float64, "float32": np.float32, "float": np.float32,
    "int8": np.int8, "uint8": np.uint8, "octet": np.uint8, "byte": np.uint8, "char": np.uint8,
    "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32,
    "int64": np.int64, "uint64": np.uint64, "bool": np.bool_, "boolean": np.bool_,
}


class Codec:
    """Resolves ROS type names to message classes and builds messages of that flavour.

    ``coerce(cls, field, value)`` turns the plain values the converters pass (lists, tuples,
    bytes, numpy arrays) into what the class accepts; ``defaults(typename)`` supplies the fields
    a converter leaves out (rosbags classes require every field).
    """

    def __init__(
        self,
        resolve: Callable[[str], type],
        coerce: Callable[[type, str, Any], Any],
        defaults: Callable[[str], dict[str, Any]] | None = None,
        flavour: str = "",
    ) -> None:
        self._resolve = resolve
        self._coerce = coerce
        self._defaults = defaults
        self._classes: dict[str, type] = {}
        self.flavour = flavour

    def cls(self, typename: str) -> type:
        c = self._classes.get(typename)
        if c is None:
            try:
                c = self._resolve(typename)
            except Exception as e:
                raise ConvertError(f"unknown ROS type {typename!r}: {e}") from e
            self._classes[typename] = c
        return c

    def new(self, typename: str, **fields: Any) -> Any:
        """A message of ``typename``; its strings cleaned of lone surrogates (a model's text
        must never make a publish fail to encode)."""
        c = self.cls(typename)
        kw = {k: self._coerce(c, k, _clean_strings(v)) for k, v in fields.items()}
        if self._defaults is not None:
            for k, v in self._defaults(typename).items():
                kw.setdefault(k, v)
        return c(**kw)


def _clean_strings(value: Any) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
        return [clean(v) if isinstance(v, str) else v for v in value]
    return value


class _RosbagsFields:
    """What ``store``'s field definitions say a message needs: every field's default (rosbags
    classes require them all) and the numpy dtype of its numeric arrays."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.fielddefs: dict[str, Any] = store.fielddefs
        self._dtypes: dict[tuple[str, str], Any] = {}

    def defaults(self, typename: str) -> dict[str, Any]:
        _, fields = self.fielddefs[typename]
        return {name: self._default(desc) for name, desc in fields}

    def _build(self, typename: str) -> Any:
        return self.store.types[typename](**self.defaults(typename))

    def _default(self, desc: Any) -> Any:
        from rosbags.interfaces import Nodetype

        kind, rest = desc
        if kind == Nodetype.BASE:
            return _base_default(rest[0])
        if kind == Nodetype.NAME:
            return self._build(rest)
        sub, n = rest
        if kind == Nodetype.ARRAY:
            if sub[0] == Nodetype.BASE and sub[1][0] != "string":
                return np.zeros(n, dtype=NP_DTYPES[sub[1][0]])
            return [self._default(sub) for _ in range(n)]
        if sub[0] == Nodetype.BASE and sub[1][0] != "string":
            return np.zeros(0, dtype=NP_DTYPES[sub[1][0]])
        return []

    def field_dtype(self, typename: str, field: str) -> Any:
        """The dtype of ``typename.field`` when it is an array of numbers, else None."""
        key = (typename, field)
        if key not in self._dtypes:
            from rosbags.interfaces import Nodetype

            dt = None
            for name, (kind, rest) in self.fielddefs[typename][1]:
                if name == field and kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
                    sub = rest[0]
                    if sub[0] == Nodetype.BASE and sub[1][0] != "string":
                        dt = NP_DTYPES[sub[1][0]]
            self._dtypes[key] = dt
        return self._dtypes[key]

    def coerce(self, cls: type, field: str, value: Any) -> Any:
        dt = self.field_dtype(cls.__msgtype__, field)  # type: ignore[attr-defined]
        if dt is None:
            return list(value) if isinstance(value, tuple) else value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return np.frombuffer(value, dtype=dt)
        arr = np.asarray(value)
        if arr.dtype != dt:
            arr = arr.astype(dt) if arr.size else np.zeros(0, dtype=dt)
        return arr.reshape(-1)


def _base_default(t: str) -> Any:
    if t == "string":
        return ""
    if t == "bool":
        return False
    if t in ("float32", "float64"):
        return 0.0
    return 0


def rosbags_codec(store: Any = None) -> Codec:
    """Message classes built by ``rosbags`` from the package's interface files."""
    if store is None:
        from .interfaces import typestore

        store = typestore()
    fields = _RosbagsFields(store)
    return Codec(lambda name: store.types[name], fields.coerce, fields.defaults,
                 flavour="rosbags")


# stamps and headers, for every flavour ----------------------------------------------------
def time_to_ros(c: Codec, t: float) -> Any:
    if not math.isfinite(t) or t < 0:
        t = 0.0
    sec = int(math.floor(t))
    nsec = int(round((t - sec) * 1e9))
    if nsec >= 1_000_000_000:
        sec, nsec = sec + 1, nsec - 1_000_000_000
    return c.new("builtin_interfaces/msg/Time", sec=sec, nanosec=nsec)


def time_from_ros(msg: Any) -> float:
    return float(msg.sec) + float(msg.nanosec) * 1e-9


def header(c: Codec, stamp: float, frame_id: str = "") -> Any:
    return c.new("std_msgs/msg/Header", stamp=time_to_ros(c, stamp), frame_id=str(frame_id))


__all__ = ["NP_DTYPES", "Codec", "ConvertError", "header", "rosbags_codec",
           "time_from_ros", "time_to_ros"]
