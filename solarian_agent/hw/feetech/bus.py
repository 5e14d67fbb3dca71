"""``FeetechBus``: Feetech STS/SCS transactions over a serial port.

Why pyserial and our own ~300 lines of protocol instead of the vendor SDK
(``feetech-servo-sdk`` / ``scservo_sdk``):

- the SDK reports failures as integer result codes that callers must remember to check; a
  missed check is a silent skip.  Here every failure is a named exception from
  ``solarian_agent.hw.errors`` that says which servo, which instruction and how many attempts.
- the SDK's receive loop busy-polls ``time.time()`` with its own latency guess and has no
  retry policy; we need bounded retries of *transient* faults (lost or corrupted answers) and a
  fault afterwards, and bounded waits everywhere.
- the SDK owns the port object; we need the port behind a small ``SerialPort`` protocol so the
  very same code runs against the USB adapter and against the simulated bus on a
  pseudo-terminal (``simbus.py``), and byte-exact tests can check every frame.
- the protocol is small and fully documented (see ``protocol.py``); pyserial is already a
  dependency and is what the SDK itself uses underneath.

I/O deadlines use the OS monotonic clock (``timer``): they time a real device, which a fake
clock cannot do.  Control logic above this layer takes a ``Clock``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import solarian_agent.hw.feetech.protocol as P
from solarian_agent.hw.errors import (
    BusError,
    ChecksumError,
    DeviceAlreadyConnectedError,
    DeviceNotConnectedError,
    DeviceNotFoundError,
    PacketError,
    ServoTimeoutError,
    status_error,
)
from solarian_agent.hw.feetech.protocol import Packet, Register


class SerialPort(Protocol):
    """What the bus needs from a serial port (``serial.Serial`` satisfies it).  ``read`` must
    return within a short timeout with whatever arrived (possibly nothing)."""

    def write(self, data: bytes) -> int | None: ...

    def read(self, size: int = 1) -> bytes: ...

    def reset_input_buffer(self) -> None: ...

    def close(self) -> None: ...


PortFactory = Callable[[str, int, float], SerialPort]


def open_serial(port: str, baudrate: int, timeout_s: float) -> SerialPort:
    """Open a serial port with pyserial (8N1, no flow control, bounded read/write timeouts)."""
    import serial

    try:
        s: SerialPort = serial.Serial(
            port=port,
            baudrate=baudrate,
            timeout=timeout_s,
            write_timeout=max(0.1, 10 * timeout_s),
        )
    except (serial.SerialException, OSError, ValueError) as e:
        raise DeviceNotFoundError(
            f"cannot open servo bus serial port {port!r} at {baudrate} baud: {e}. "
            "List adapters with `ls -l /dev/serial/by-id/` (and check `dmesg | tail`)"
        ) from e
    return s


@dataclass
class BusStats:
    """Counters since connect: frames, bytes, retries and faults by kind."""

    tx_frames: int = 0
    rx_frames: int = 0
    tx_bytes: int = 0
    rx_bytes: int = 0
    retries: int = 0
    timeouts: int = 0
    checksum_errors: int = 0
    packet_errors: int = 0
    stray_frames: int = 0
    faults: int = 0
    last_fault: str = ""


@dataclass(frozen=True)
class StatusReply:
    """One servo's answer: its error byte and the data it carried."""

    servo_id: int
    error: int
    data: bytes = b""


@dataclass
class _Collect:
    expected: dict[int, int]  # id -> number of parameter bytes
    got: dict[int, Packet] = field(default_factory=dict)


_TRANSIENT = (ServoTimeoutError, ChecksumError, PacketError)


class FeetechBus:
    """Transactions on one Feetech serial bus; thread-safe (one transaction at a time).

    ``timeout_s`` bounds the wait for each answer (plus the answer's own wire time);
    ``retries`` is how many times a transaction whose answer was lost, cut short or corrupted
    is repeated before the fault is raised (``ServoTimeoutError`` / ``ChecksumError`` /
    ``PacketError`` naming the servo and the attempts).  A servo that answers with error flags
    is not retried: the caller gets ``ServoStatusError`` (or the flags, for sync reads).
    """

    def __init__(
        self,
        port: str,
        baudrate: int = 1_000_000,
        timeout_s: float = 0.025,
        retries: int = 2,
        port_factory: PortFactory | None = None,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.port_name = port
        self.baudrate = baudrate
        self.timeout_s = timeout_s
        self.retries = retries
        self._factory = port_factory or open_serial
        self._timer = timer
        self._port: SerialPort | None = None
        self._lock = threading.RLock()
        self.stats = BusStats()

    # ------------------------------------------------------------------ connection

    @property
    def is_connected(self) -> bool:
        return self._port is not None

    def connect(self) -> None:
        with self._lock:
            if self._port is not None:
                raise DeviceAlreadyConnectedError(f"servo bus {self.port_name} is already open")
            # the port's own read timeout is short; deadlines are enforced here
            self._port = self._factory(self.port_name, self.baudrate, min(0.01, self.timeout_s))
            self.stats = BusStats()

    def disconnect(self) -> None:
        with self._lock:
            port, self._port = self._port, None
            if port is not None:
                try:
                    port.close()
                except Exception:  # closing a vanished device must not raise
                    pass

    def _require(self) -> SerialPort:
        if self._port is None:
            raise DeviceNotConnectedError(
                f"servo bus {self.port_name} is not connected; call connect() first"
            )
        return self._port

    def __enter__(self) -> FeetechBus:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    # ------------------------------------------------------------------ raw I/O

    def byte_time_s(self) -> float:
        return 10.0 / self.baudrate

    def _write(self, port: SerialPort, frame: bytes) -> None:
        try:
            n = port.write(frame)
        except Exception as e:  # pyserial raises SerialException / SerialTimeoutException
            raise BusError(f"writing {len(frame)} bytes to {self.port_name} failed: {e}") from e
        if n is not None and n != len(frame):
            raise BusError(f"wrote {n} of {len(frame)} bytes to {self.port_name}")
        self.stats.tx_frames += 1
        self.stats.tx_bytes += len(frame)

    def _collect(self, port: SerialPort, c: _Collect, what: str) -> None:
        """Read status packets until every expected id answered or the deadline passed."""
        need = sum(P.status_packet_size(n) for n in c.expected.values())
        deadline = self._timer() + self.timeout_s + need * self.byte_time_s()
        splitter = P.PacketSplitter()
        while len(c.got) < len(c.expected):
            missing_bytes = sum(
                P.status_packet_size(n) for i, n in c.expected.items() if i not in c.got
            ) - splitter.pending()
            try:
                chunk = port.read(max(1, missing_bytes))
            except Exception as e:
                raise BusError(f"reading from {self.port_name} failed during {what}: {e}") from e
            if chunk:
                self.stats.rx_bytes += len(chunk)
                splitter.feed(chunk)
                for frame in splitter.packets():
                    self._accept(frame, c, what)
            elif self._timer() >= deadline:
                missing = sorted(set(c.expected) - set(c.got))
                partial = f" ({splitter.pending()} bytes of a partial answer)" \
                    if splitter.pending() else ""
                raise ServoTimeoutError(
                    f"servo {', '.join(map(str, missing))} did not answer {what} within "
                    f"{self.timeout_s * 1000:.0f} ms{partial}",
                    missing[0],
                )
            if self._timer() >= deadline + self.timeout_s:
                # a stream of noise must not keep us here either
                missing = sorted(set(c.expected) - set(c.got))
                raise ServoTimeoutError(
                    f"servo {', '.join(map(str, missing))}: no valid answer to {what} "
                    f"within {self.timeout_s * 1000:.0f} ms", missing[0] if missing else None)

    def _accept(self, frame: bytes, c: _Collect, what: str) -> None:
        pkt = P.parse_packet(frame)  # ChecksumError / PacketError propagate (retried)
        self.stats.rx_frames += 1
        n = c.expected.get(pkt.servo_id)
        if n is None or pkt.servo_id in c.got:
            self.stats.stray_frames += 1  # a late answer to an earlier, timed-out request
            return
        if len(pkt.params) != n:
            raise PacketError(
                f"servo {pkt.servo_id} answered {what} with {len(pkt.params)} data bytes, "
                f"expected {n}", pkt.servo_id,
            )
        c.got[pkt.servo_id] = pkt

    def _transact(self, frame: bytes, expected: Mapping[int, int], what: str) -> dict[int, Packet]:
        """Send ``frame``; collect one status packet per expected id; retry transient faults."""
        with self._lock:
            port = self._require()
            attempts = 1 + self.retries
            last: BusError | None = None
            for attempt in range(attempts):
                if attempt:
                    self.stats.retries += 1
                try:
                    port.reset_input_buffer()  # drop late answers to earlier requests
                except Exception as e:
                    raise BusError(f"flushing {self.port_name} failed: {e}") from e
                self._write(port, frame)
                if not expected:
                    return {}
                c = _Collect(dict(expected))
                try:
                    self._collect(port, c, what)
                    return c.got
                except _TRANSIENT as e:
                    last = e
                    if isinstance(e, ServoTimeoutError):
                        self.stats.timeouts += 1
                    elif isinstance(e, ChecksumError):
                        self.stats.checksum_errors += 1
                    else:
                        self.stats.packet_errors += 1
            assert last is not None
            self.stats.faults += 1
            msg = f"{last} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})"
            self.stats.last_fault = msg
            raise type(last)(msg, last.servo_id) from last

    # ------------------------------------------------------------------ instructions

    def ping(self, servo_id: int) -> int:
        """PING a servo; returns its error byte (0 when healthy).  Raises if it is silent."""
        got = self._transact(P.ping_packet(servo_id), {servo_id: 0}, "PING")
        return got[servo_id].error

    def read(self, servo_id: int, address: int, length: int) -> bytes:
        """READ ``length`` bytes at ``address``; raises ``ServoStatusError`` on error flags."""
        what = f"READ {length}@{address}"
        pkt = self._transact(P.read_packet(servo_id, address, length), {servo_id: length},
                             what)[servo_id]
        if pkt.error:
            raise status_error(servo_id, pkt.error, what, pkt.params)
        return pkt.params

    def write(self, servo_id: int, address: int, data: bytes) -> None:
        """WRITE bytes at ``address`` and wait for the servo's acknowledgement."""
        what = f"WRITE {len(data)}@{address}"
        pkt = self._transact(P.write_packet(servo_id, address, data), {servo_id: 0},
                             what)[servo_id]
        if pkt.error:
            raise status_error(servo_id, pkt.error, what)

    def sync_read(self, address: int, length: int, ids: Sequence[int]) -> dict[int, StatusReply]:
        """SYNC_READ ``length`` bytes at ``address`` from every id.  Error flags are returned
        in each reply, not raised: a reading with a flag set is still a reading."""
        if not ids:
            return {}
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate ids in sync read: {list(ids)}")
        what = f"SYNC_READ {length}@{address}"
        got = self._transact(P.sync_read_packet(address, length, ids),
                             {i: length for i in ids}, what)
        return {i: StatusReply(i, got[i].error, got[i].params) for i in ids}

    def sync_write(self, address: int, length: int, data: Mapping[int, bytes]) -> None:
        """SYNC_WRITE (broadcast; servos do not answer, so there is nothing to retry)."""
        if not data:
            return
        self._transact(P.sync_write_packet(address, length, data), {}, "SYNC_WRITE")

    # ------------------------------------------------------------------ registers

    def read_register(self, servo_id: int, reg: Register) -> int:
        return P.decode_value(self.read(servo_id, reg.address, reg.size), reg.sign_bit)

    def write_register(self, servo_id: int, reg: Register, value: int) -> None:
        if not reg.writable:
            raise ValueError(f"register {reg.name} ({reg.address}) is read-only")
        self.write(servo_id, reg.address, P.encode_value(value, reg.size, reg.sign_bit))

    def sync_write_register(self, reg: Register, values: Mapping[int, int]) -> None:
        if not reg.writable:
            raise ValueError(f"register {reg.name} ({reg.address}) is read-only")
        self.sync_write(reg.address, reg.size,
                        {i: P.encode_value(v, reg.size, reg.sign_bit) for i, v in values.items()})

    def broadcast_ping(self, wait_s: float | None = None) -> list[int]:
        """The ids that answer a PING sent to every servo (set-up tools: with one servo on the
        bus it finds that servo's id at once).  Collects answers for ``wait_s`` (default four
        answer timeouts); garbled answers are skipped."""
        with self._lock:
            port = self._require()
            try:
                port.reset_input_buffer()
            except Exception as e:
                raise BusError(f"flushing {self.port_name} failed: {e}") from e
            self._write(port, P.build_packet(P.BROADCAST_ID, P.Instruction.PING))
            deadline = self._timer() + (4 * self.timeout_s if wait_s is None else wait_s)
            splitter = P.PacketSplitter()
            ids: set[int] = set()
            while self._timer() < deadline:
                try:
                    chunk = port.read(64)
                except Exception as e:
                    raise BusError(f"reading from {self.port_name} failed during a broadcast "
                                   f"PING: {e}") from e
                if not chunk:
                    continue
                self.stats.rx_bytes += len(chunk)
                splitter.feed(chunk)
                for frame in splitter.packets():
                    try:
                        ids.add(P.parse_packet(frame).servo_id)
                    except (ChecksumError, PacketError):
                        self.stats.checksum_errors += 1
            return sorted(ids)

    def scan(self, ids: Sequence[int] = tuple(range(0, P.MAX_ID + 1))) -> list[int]:
        """Ids that answer a PING (for set-up tools; slow on a silent bus: one timeout each)."""
        found = []
        saved, self.retries = self.retries, 0
        try:
            for i in ids:
                try:
                    self.ping(i)
                    found.append(i)
                except (ServoTimeoutError, ChecksumError, PacketError):
                    continue
        finally:
            self.retries = saved
        return found
