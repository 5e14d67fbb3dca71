"""The Feetech STS/SCS serial-bus servo protocol, byte for byte (no I/O here).

Half-duplex, 8N1, 1 Mbps by default.  Checked against Feetech's own ``scservo_sdk``
(``protocol_packet_handler.py``, ``scservo_def.py``) and LeRobot's STS3215 control table:

Instruction packet (host → servo)::

    0xFF 0xFF  ID  LEN  INSTR  P1 .. PN  CHK        LEN = N + 2
    CHK = ~(ID + LEN + INSTR + P1 + .. + PN) & 0xFF

Status packet (servo → host)::

    0xFF 0xFF  ID  LEN  ERROR  P1 .. PN  CHK        LEN = N + 2

- PING (0x01): no parameters; answer has no parameters.
- READ (0x02): ``addr, n``; answer carries ``n`` bytes.
- WRITE (0x03): ``addr, d1..dn``; answer has no parameters.
- SYNC_READ (0x82), broadcast id 0xFE: ``addr, n, id1..idk``; every listed servo answers
  with its own status packet carrying ``n`` bytes, in the order of the list.
- SYNC_WRITE (0x83), broadcast id 0xFE: ``addr, n, (id, d1..dn) * k``; nobody answers.

STS servos are little-endian (the SDK's ``scs_end = 0``).  Some registers are
sign-magnitude: bit 15 for speeds and goal/present position, bit 10 for load, bit 11 for the
homing offset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from solarian_agent.hw.errors import ChecksumError, PacketError

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
MAX_ID = 0xFD
MAX_PACKET = 250  # the SDK's TX/RXPACKET_MAX_LEN
STATUS_OVERHEAD = 6  # FF FF ID LEN ERR .. CHK
TICKS_PER_TURN = 4096  # STS3215: 12-bit magnetic encoder
MAX_TICK = TICKS_PER_TURN - 1
STS3215_MODEL_NUMBER = 777
# the baud rate register's values (STS/SMS series): bits per second -> register value
BAUD_RATES: dict[int, int] = {1_000_000: 0, 500_000: 1, 250_000: 2, 128_000: 3, 115_200: 4,
                              57_600: 5, 38_400: 6, 19_200: 7}


class Instruction(IntEnum):
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83


@dataclass(frozen=True)
class Register:
    """One control-table entry: address, size in bytes, writable, sign bit (None: unsigned)."""

    name: str
    address: int
    size: int
    writable: bool = True
    sign_bit: int | None = None


class STS3215:
    """The STS3215 control table (Feetech STS/SMS series memory map) — the registers we use."""

    MODEL_NUMBER = Register("model_number", 3, 2, writable=False)
    ID = Register("id", 5, 1)
    BAUD_RATE = Register("baud_rate", 6, 1)
    RETURN_DELAY = Register("return_delay", 7, 1)
    MIN_POSITION_LIMIT = Register("min_position_limit", 9, 2)
    MAX_POSITION_LIMIT = Register("max_position_limit", 11, 2)
    MAX_TEMPERATURE = Register("max_temperature", 13, 1)
    MAX_VOLTAGE = Register("max_voltage", 14, 1)
    MIN_VOLTAGE = Register("min_voltage", 15, 1)
    MAX_TORQUE_LIMIT = Register("max_torque_limit", 16, 2)  # 0.1 % of stall torque
    P_COEFFICIENT = Register("p_coefficient", 21, 1)
    D_COEFFICIENT = Register("d_coefficient", 22, 1)
    I_COEFFICIENT = Register("i_coefficient", 23, 1)
    PROTECTION_CURRENT = Register("protection_current", 28, 2)  # 6.5 mA units
    HOMING_OFFSET = Register("homing_offset", 31, 2, sign_bit=11)
    OPERATING_MODE = Register("operating_mode", 33, 1)
    PROTECTION_TIME = Register("protection_time", 35, 1)  # 10 ms units
    OVERLOAD_TORQUE = Register("overload_torque", 36, 1)  # % of the torque limit
    TORQUE_ENABLE = Register("torque_enable", 40, 1)
    ACCELERATION = Register("acceleration", 41, 1)
    GOAL_POSITION = Register("goal_position", 42, 2, sign_bit=15)
    GOAL_TIME = Register("goal_time", 44, 2)
    GOAL_SPEED = Register("goal_speed", 46, 2, sign_bit=15)
    TORQUE_LIMIT = Register("torque_limit", 48, 2)
    LOCK = Register("lock", 55, 1)
    PRESENT_POSITION = Register("present_position", 56, 2, writable=False, sign_bit=15)
    PRESENT_SPEED = Register("present_speed", 58, 2, writable=False, sign_bit=15)
    PRESENT_LOAD = Register("present_load", 60, 2, writable=False, sign_bit=10)
    PRESENT_VOLTAGE = Register("present_voltage", 62, 1, writable=False)
    PRESENT_TEMPERATURE = Register("present_temperature", 63, 1, writable=False)
    STATUS = Register("status", 65, 1, writable=False)
    MOVING = Register("moving", 66, 1, writable=False)
    PRESENT_CURRENT = Register("present_current", 69, 2, writable=False, sign_bit=15)

    # Registers below this address live in EEPROM: kept across power cycles, and written only
    # while LOCK is 0 (a locked servo acknowledges the write and keeps its old value).
    EEPROM_END = 40

    # One contiguous block 56..66 gives everything the control loop reads each tick.
    STATE_BLOCK_START = 56
    STATE_BLOCK_SIZE = 66 - 56 + 1

    @classmethod
    def all(cls) -> tuple[Register, ...]:
        return tuple(v for v in vars(cls).values() if isinstance(v, Register))


# --------------------------------------------------------------------------- encoding


def checksum(body: Iterable[int]) -> int:
    """``~sum & 0xFF`` over everything between the header and the checksum byte."""
    return (~sum(body)) & 0xFF


def encode_value(value: int, size: int, sign_bit: int | None = None) -> bytes:
    """Little-endian bytes of a register value (sign-magnitude where ``sign_bit`` is set)."""
    if sign_bit is not None:
        if abs(value) >= (1 << sign_bit):
            raise ValueError(f"value {value} does not fit a sign-magnitude field with sign bit "
                             f"{sign_bit}")
        raw = abs(value) | ((1 << sign_bit) if value < 0 else 0)
    else:
        if value < 0 or value >= (1 << (8 * size)):
            raise ValueError(f"value {value} does not fit {size} unsigned byte(s)")
        raw = value
    return raw.to_bytes(size, "little")


def decode_value(data: bytes, sign_bit: int | None = None) -> int:
    raw = int.from_bytes(data, "little")
    if sign_bit is not None and raw & (1 << sign_bit):
        return -(raw & ((1 << sign_bit) - 1))
    return raw


def _check_id(servo_id: int, allow_broadcast: bool = False) -> None:
    top = BROADCAST_ID if allow_broadcast else MAX_ID
    if not 0 <= servo_id <= top:
        raise ValueError(f"servo id {servo_id} outside 0..{top}")


def build_packet(servo_id: int, instruction: int, params: bytes | Sequence[int] = b"") -> bytes:
    """One instruction packet, header and checksum included."""
    _check_id(servo_id, allow_broadcast=True)
    params = bytes(params)
    length = len(params) + 2
    if length + 4 > MAX_PACKET:
        raise ValueError(f"packet of {length + 4} bytes exceeds the {MAX_PACKET}-byte limit")
    body = bytes([servo_id, length, int(instruction)]) + params
    return HEADER + body + bytes([checksum(body)])


def ping_packet(servo_id: int) -> bytes:
    _check_id(servo_id)
    return build_packet(servo_id, Instruction.PING)


def read_packet(servo_id: int, address: int, length: int) -> bytes:
    _check_id(servo_id)
    return build_packet(servo_id, Instruction.READ, bytes([address, length]))


def write_packet(servo_id: int, address: int, data: bytes) -> bytes:
    _check_id(servo_id, allow_broadcast=True)
    return build_packet(servo_id, Instruction.WRITE, bytes([address]) + bytes(data))


def sync_read_packet(address: int, length: int, ids: Sequence[int]) -> bytes:
    for i in ids:
        _check_id(i)
    return build_packet(BROADCAST_ID, Instruction.SYNC_READ, bytes([address, length, *ids]))


def sync_write_packet(address: int, length: int, data: Mapping[int, bytes]) -> bytes:
    params = bytearray([address, length])
    for servo_id, payload in data.items():
        _check_id(servo_id)
        if len(payload) != length:
            raise ValueError(f"sync write to servo {servo_id}: {len(payload)} bytes, "
                             f"expected {length}")
        params.append(servo_id)
        params += payload
    return build_packet(BROADCAST_ID, Instruction.SYNC_WRITE, bytes(params))


def status_packet(servo_id: int, error: int = 0, params: bytes = b"") -> bytes:
    """A status packet as a servo sends it (used by the simulated bus and tests)."""
    _check_id(servo_id)
    body = bytes([servo_id, len(params) + 2, error & 0xFF]) + bytes(params)
    return HEADER + body + bytes([checksum(body)])


def status_packet_size(n_params: int) -> int:
    return STATUS_OVERHEAD + n_params


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Packet:
    """A parsed packet; ``code`` is the instruction (host→servo) or the error byte (status)."""

    servo_id: int
    code: int
    params: bytes

    @property
    def instruction(self) -> int:
        return self.code

    @property
    def error(self) -> int:
        return self.code


def parse_packet(frame: bytes) -> Packet:
    """Parse exactly one complete packet.  Raises ``PacketError`` / ``ChecksumError``."""
    if len(frame) < STATUS_OVERHEAD or frame[:2] != HEADER:
        raise PacketError(f"not a packet: {frame.hex(' ')}")
    servo_id, length = frame[2], frame[3]
    if length < 2 or len(frame) != length + 4:
        raise PacketError(f"packet length byte {length} does not match the frame of "
                          f"{len(frame)} bytes: {frame.hex(' ')}", servo_id)
    expected = checksum(frame[2:-1])
    if frame[-1] != expected:
        raise ChecksumError(f"checksum 0x{frame[-1]:02x} != 0x{expected:02x} in "
                            f"{frame.hex(' ')}", servo_id)
    return Packet(servo_id, frame[4], bytes(frame[5:-1]))


class PacketSplitter:
    """Incremental framing of a byte stream into packets (header hunt, resync on garbage).

    ``feed(data)`` then ``packets()`` yields every complete frame (checked or not); bytes
    before a header are dropped and counted in ``discarded``.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self.discarded = 0

    def feed(self, data: bytes) -> None:
        self._buf += data

    def pending(self) -> int:
        return len(self._buf)

    def next_frame(self) -> bytes | None:
        """The next complete raw frame, or None if more bytes are needed."""
        buf = self._buf
        while True:
            i = buf.find(HEADER)
            if i < 0:
                # keep a trailing 0xFF: it may be the first half of a header
                keep = 1 if buf[-1:] == b"\xff" else 0
                self.discarded += len(buf) - keep
                del buf[: len(buf) - keep]
                return None
            if i:
                self.discarded += i
                del buf[:i]
            if len(buf) < 4:
                return None
            # FF FF FF ...: the first FF is noise before the real header
            if buf[2] == 0xFF:
                self.discarded += 1
                del buf[:1]
                continue
            length = buf[3]
            if length < 2:
                self.discarded += 2
                del buf[:2]
                continue
            if length + 4 > MAX_PACKET:
                # no packet is longer (the SDK's rxPacket resyncs so too): a noisy length byte,
                # which would otherwise make the splitter wait for up to 255 bytes and swallow
                # the real answers behind it until the transaction times out
                self.discarded += 2
                del buf[:2]
                continue
            total = length + 4
            if len(buf) < total:
                return None
            frame = bytes(buf[:total])
            del buf[:total]
            return frame

    def packets(self) -> list[bytes]:
        out: list[bytes] = []
        while (f := self.next_frame()) is not None:
            out.append(f)
        return out


def wire_time_s(n_bytes: int, baudrate: int, bits_per_byte: int = 10) -> float:
    """Seconds ``n_bytes`` occupy the wire at 8N1 (10 bits per byte)."""
    return n_bytes * bits_per_byte / baudrate


def sync_read_wire_bytes(n_servos: int, length: int) -> int:
    """Bytes on the wire for one SYNC_READ of ``length`` bytes from ``n_servos`` servos."""
    return len(sync_read_packet(0, length, list(range(1, n_servos + 1)))) + n_servos * (
        status_packet_size(length)
    )
