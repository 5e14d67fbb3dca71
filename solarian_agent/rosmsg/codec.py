"""Codecs: a ROS type name (``"sensor_msgs/msg/Image"``, ``"solarian_agent/action/Skill_Goal"``)
resolved to its message class, and instances built with numeric arrays coerced to what that
flavour of class wants -- :func:`rclpy_codec` (the classes rosidl generates; only inside the
node shells) and :func:`rosbags_codec` (the classes ``rosbags`` builds from the same interface
files; the bag writer and the tests).  No rclpy at import."""

from __future__ import annotations

import array
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
_NP_DTYPES = {
    "float64": np.float64, "double": np.float64, "float32": np.float32, "float": np.float32,
    "int8": np.int8, "uint8": np.uint8, "octet": np.uint8, "byte": np.uint8, "char": np.uint8,
    "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32,
    "int64": np.int64, "uint64": np.uint64, "bool": np.bool_, "boolean": np.bool_,
}
_ARRAY_CODES = {
    "double": "d", "float": "f", "int8": "b", "uint8": "B", "octet": "B", "int16": "h",
    "uint16": "H", "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q",
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


def rosbags_codec(store: Any = None) -> Codec:
    """Message classes built by ``rosbags`` from the package's interface files."""
    if store is None:
        from .interfaces import typestore

        store = typestore()
    fielddefs: dict[str, Any] = store.fielddefs

    def _desc_default(desc: Any) -> Any:
        from rosbags.interfaces import Nodetype

        kind, rest = desc
        if kind == Nodetype.BASE:
            t = rest[0]
            if t == "string":
                return ""
            if t == "bool":
                return False
            if t in ("float32", "float64"):
                return 0.0
            return 0
        if kind == Nodetype.NAME:
            return _build(rest)
        sub, n = rest
        if kind == Nodetype.ARRAY:
            if sub[0] == Nodetype.BASE and sub[1][0] != "string":
                return np.zeros(n, dtype=_NP_DTYPES[sub[1][0]])
            return [_desc_default(sub) for _ in range(n)]
        if sub[0] == Nodetype.BASE and sub[1][0] != "string":
            return np.zeros(0, dtype=_NP_DTYPES[sub[1][0]])
        return []

    def defaults(typename: str) -> dict[str, Any]:
        _, fields = fielddefs[typename]
        return {name: _desc_default(desc) for name, desc in fields}

    def _build(typename: str) -> Any:
        return store.types[typename](**defaults(typename))

    numeric: dict[tuple[str, str], Any] = {}

    def field_dtype(typename: str, field: str) -> Any:
        key = (typename, field)
        if key not in numeric:
            from rosbags.interfaces import Nodetype

            dt = None
            for name, (kind, rest) in fielddefs[typename][1]:
                if name == field and kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
                    sub = rest[0]
                    if sub[0] == Nodetype.BASE and sub[1][0] != "string":
                        dt = _NP_DTYPES[sub[1][0]]
            numeric[key] = dt
        return numeric[key]

    def coerce(cls: type, field: str, value: Any) -> Any:
        dt = field_dtype(cls.__msgtype__, field)  # type: ignore[attr-defined]
        if dt is None:
            return list(value) if isinstance(value, tuple) else value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return np.frombuffer(value, dtype=dt)
        arr = np.asarray(value)
        if arr.dtype != dt:
            arr = arr.astype(dt) if arr.size else np.zeros(0, dtype=dt)
        return arr.reshape(-1)

    return Codec(lambda name: store.types[name], coerce, defaults, flavour="rosbags")


def _rclpy_resolve(typename: str) -> type:
    from .ros_types import interface_class

    return interface_class(typename)  # type: ignore[no-any-return]


def rclpy_coerce(cls: type, field: str, value: Any) -> Any:
    """Fit a plain value to an rosidl-generated field (``sequence<double>`` -> array('d'),
    ``double[9]`` -> numpy, ``sequence<uint8>`` -> array('B'))."""
    types: dict[str, str] = cls.get_fields_and_field_types()  # type: ignore[attr-defined]
    t = types.get(field, "")
    if t.startswith("sequence<"):
        inner = t[len("sequence<"):-1].split(",")[0].strip()
        code = _ARRAY_CODES.get(inner)
        if code is None:
            return list(value)
        out = array.array(code)
        if isinstance(value, (bytes, bytearray, memoryview)) or (
                isinstance(value, np.ndarray) and value.dtype == np.dtype(_NP_DTYPES[inner])):
            out.frombytes(np.ascontiguousarray(value).tobytes()
                          if isinstance(value, np.ndarray) else bytes(value))
        else:
            out.extend(value)
        return out
    if "[" in t and t.endswith("]") and not t.startswith("string"):
        inner = t[:t.index("[")]
        dt = _NP_DTYPES.get(inner)
        if dt is not None:
            return np.asarray(value, dtype=dt)
    if isinstance(value, tuple):
        return list(value)
    return value


def rclpy_codec() -> Codec:
    """The message classes rosidl generated (only importable where ROS is installed)."""
    return Codec(_rclpy_resolve, rclpy_coerce, None, flavour="rclpy")


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


__all__ = ["Codec", "ConvertError", "header", "rclpy_codec", "rclpy_coerce", "rosbags_codec",
           "time_from_ros", "time_to_ros"]
