"""The rclpy flavour of :class:`~solarian_agent.rosmsg.codec.Codec`: the message classes rosidl
generates (``array.array`` for sequences, numpy for fixed-size arrays, every field optional),
only importable where ROS is installed; the node shells' codec.  No rclpy at import."""

from __future__ import annotations

import array
from typing import Any

import numpy as np

from ..rosmsg.codec import NP_DTYPES, Codec

# the array.array type code of each ROS numeric type
ARRAY_CODES = {
    "double": "d", "float": "f", "int8": "b", "uint8": "B", "octet": "B", "int16": "h",
    "uint16": "H", "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q",
}


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
        code = ARRAY_CODES.get(inner)
        if code is None:
            return list(value)
        out = array.array(code)
        if isinstance(value, (bytes, bytearray, memoryview)) or (
                isinstance(value, np.ndarray) and value.dtype == np.dtype(NP_DTYPES[inner])):
            out.frombytes(np.ascontiguousarray(value).tobytes()
                          if isinstance(value, np.ndarray) else bytes(value))
        else:
            out.extend(value)
        return out
    if "[" in t and t.endswith("]") and not t.startswith("string"):
        inner = t[:t.index("[")]
        dt = NP_DTYPES.get(inner)
        if dt is not None:
            return np.asarray(value, dtype=dt)
    if isinstance(value, tuple):
        return list(value)
    return value


def rclpy_codec() -> Codec:
    """The message classes rosidl generated (only importable where ROS is installed)."""
    return Codec(_rclpy_resolve, rclpy_coerce, None, flavour="rclpy")


__all__ = ["ARRAY_CODES", "rclpy_codec", "rclpy_coerce"]
