"""The hardware layer's one exception hierarchy.

Every error names the device, the servo id / joint or the camera source, and what happened, so
that a ROS node shell can put ``str(error)`` straight into a diagnostic message or a log line.

    HardwareError
    ├── DeviceNotConnectedError        used while disconnected (or the device went away)
    │   └── CameraDisconnectedError    a camera vanished and reconnecting failed
    ├── DeviceAlreadyConnectedError    connect() twice
    ├── DeviceNotFoundError            the port / camera / servo id does not exist
    ├── CalibrationError               a calibration file or procedure is unusable
    ├── BusError                       a servo-bus transaction failed
    │   ├── ServoTimeoutError          no (complete) answer within the timeout, after retries
    │   ├── ChecksumError              an answer arrived with a bad checksum, after retries
    │   ├── PacketError                an answer that is not a valid status packet
    │   └── ServoStatusError           the servo answered with error flags set
    │       ├── VoltageError / AngleLimitError / OverheatError
    │       └── OverCurrentError / OverloadError
    └── CameraError
        └── CameraStalledError         no new frame within the stall timeout
            └── EndOfStreamError       a video file ran out of frames
"""

from __future__ import annotations


class HardwareError(Exception):
    """Base of every error the hardware layer raises."""


class DeviceNotConnectedError(HardwareError):
    """A device was used while it is not connected."""


class DeviceAlreadyConnectedError(HardwareError):
    """``connect()`` was called on a device that is already connected."""


class DeviceNotFoundError(HardwareError):
    """The serial port, camera or servo id does not exist or does not answer at connect time."""


class CalibrationError(HardwareError):
    """A calibration file or calibration run is unusable; the message names the joint."""


# --------------------------------------------------------------------------- servo bus


class BusError(HardwareError):
    """A servo-bus transaction failed.  ``servo_id`` is None for broadcast frames."""

    def __init__(self, message: str, servo_id: int | None = None) -> None:
        self.servo_id = servo_id
        super().__init__(message)


class ServoTimeoutError(BusError):
    """The servo did not answer (completely) within the timeout, after the bounded retries."""


class ChecksumError(BusError):
    """An answer arrived with a checksum that does not match, after the bounded retries."""


class PacketError(BusError):
    """An answer arrived that is not a valid status packet (bad length, wrong id, ...)."""


# Status (error) byte of a Feetech STS/SCS status packet.  Bit values as in Feetech's own
# SDK (``scservo_def.py``: ERRBIT_VOLTAGE=1, ERRBIT_ANGLE=2, ERRBIT_OVERHEAT=4,
# ERRBIT_OVERELE=8, ERRBIT_OVERLOAD=32).
STATUS_FLAGS: dict[int, str] = {
    0x01: "input voltage error",
    0x02: "angle sensor / angle limit error",
    0x04: "overheat",
    0x08: "over-current",
    0x20: "overload",
}


def decode_status_flags(error_byte: int) -> tuple[str, ...]:
    """Names of the flags set in a status packet's error byte (unknown bits named by value)."""
    names = [name for bit, name in STATUS_FLAGS.items() if error_byte & bit]
    unknown = error_byte & ~sum(STATUS_FLAGS)
    for bit in range(8):
        if unknown & (1 << bit):
            names.append(f"unknown flag 0x{1 << bit:02x}")
    return tuple(names)


class ServoStatusError(BusError):
    """The servo answered, with error flags set.  ``flags`` are the decoded flag names, ``data``
    the payload that came with the answer (a reading is still a reading), ``joint`` the joint
    name where the caller knows it."""

    def __init__(
        self,
        servo_id: int,
        error_byte: int,
        where: str = "",
        data: bytes = b"",
        joint: str = "",
    ) -> None:
        self.error_byte = error_byte
        self.flags = decode_status_flags(error_byte)
        self.where = where
        self.data = data
        self.joint = joint
        who = f"servo {servo_id}" + (f" ({joint})" if joint else "")
        ctx = f" answering {where}" if where else ""
        super().__init__(
            f"{who} reports {', '.join(self.flags) or 'no flags'}"
            f" (status byte 0x{error_byte:02x}){ctx}",
            servo_id,
        )


class VoltageError(ServoStatusError):
    """Input voltage outside the servo's configured window (bit 0)."""


class AngleLimitError(ServoStatusError):
    """Angle sensor error / goal outside the servo's angle limits (bit 1)."""


class OverheatError(ServoStatusError):
    """Servo temperature above its limit (bit 2)."""


class OverCurrentError(ServoStatusError):
    """Current above the servo's limit (bit 3)."""


class OverloadError(ServoStatusError):
    """Load above the servo's limit for too long; the servo drops torque (bit 5)."""


_STATUS_CLASSES: tuple[tuple[int, type[ServoStatusError]], ...] = (
    (0x01, VoltageError),
    (0x20, OverloadError),
    (0x04, OverheatError),
    (0x08, OverCurrentError),
    (0x02, AngleLimitError),
)


def status_error(
    servo_id: int, error_byte: int, where: str = "", data: bytes = b"", joint: str = ""
) -> ServoStatusError:
    """The most specific ``ServoStatusError`` for an error byte (all flags stay in ``flags``)."""
    cls: type[ServoStatusError] = ServoStatusError
    for bit, candidate in _STATUS_CLASSES:
        if error_byte & bit:
            cls = candidate
            break
    return cls(servo_id, error_byte, where=where, data=data, joint=joint)


# --------------------------------------------------------------------------- cameras


class CameraError(HardwareError):
    """A camera failed; the message names its source."""


class CameraDisconnectedError(CameraError, DeviceNotConnectedError):
    """The camera went away and the bounded reconnect attempts failed (or none are allowed)."""


class CameraStalledError(CameraError):
    """The camera is open but delivered no new frame within the stall timeout."""


class EndOfStreamError(CameraStalledError):
    """A video file has no more frames."""
