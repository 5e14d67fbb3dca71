"""A simulated Feetech STS3215 servo bus on a pseudo-terminal (a documented test fake).

``SimulatedBus`` opens a pty pair and answers on the master side, byte for byte as STS3215
servos would: PING, READ, WRITE, REG_WRITE/ACTION, SYNC_READ and SYNC_WRITE, with a register
memory per servo and a present position that moves toward the goal position at a set speed
while torque is enabled.  The driver under test opens ``bus.port_name`` (the slave tty) with
pyserial exactly as it would open ``/dev/ttyACM0``, so the real serial code path runs.

Faults are injected on demand, per servo:

- ``inject(id, "no_answer", count)``: the servo stays silent (``count=None``: until cleared);
- ``inject(id, "checksum", count)``: the answer carries a wrong checksum;
- ``inject(id, "truncated", count)``: only the first half of the answer is sent;
- ``inject(id, "garbage", count)``: noise bytes precede a valid answer (the driver resyncs);
- ``inject(id, "delay", count, delay_s=...)``: the answer comes late (a timeout);
- ``set_error_flags(id, 0x01)``: every answer carries the status flag (0x01 input voltage,
  0x04 overheat, 0x20 overload, ...) until set back to 0.

Set-up tools are served too: a broadcast PING is answered by every servo (in id order); a WRITE
to the ID register answers under the old id and then moves the servo to its new id; each servo
listens at the baud rate its BAUD_RATE register says, and ignores frames sent at another speed
(the host's speed is read off the pseudo-terminal, where pyserial sets it).  ``attach`` /
``detach`` plug servos in and out, ``set_baud`` sets one's speed as a factory or an earlier
set-up left it.

Everything the host sent is kept (``frames()``, ``goal_writes()``) so tests can check what
reached the wire.  The answering thread waits with bounded ``select`` timeouts and stops on
``stop()``; an exception while answering is recorded in ``errors`` and never ends the thread.

The servos are as strict as STS3215s: a goal outside Min/Max_Position_Limit (registers 9
and 11) is clipped to the limit; EEPROM writes (addresses below 40) while Lock (55) is 1 are
acknowledged and ignored, and a servo starts locked (the stricter case: whatever writes its
EEPROM must unlock it first, as the vendor's and LeRobot's own tools do); each status packet
waits Return_Delay_Time × 2 µs (the factory's 250: 500 µs) before it is sent; the reported
position stays in 0..4095 (multi-turn off).
Load heats a servo toward ``ambient + heat_c_at_full_load × load`` with time constant
``thermal_tau_s``; at Max_Temperature_Limit (13) it sets the overheat flag and drops torque,
and a load above Overload_Torque (36, % of Torque_Limit) for Protection_Time (35, 10 ms
units) sets the overload flag and drops torque, as the servo's own protection does (writing
torque on again clears the overload flag).  The supply sags under the bus's total load
(``sag_dv_at_full_load`` decivolts per servo at full load).  ``obstruct(id, below, above)``
puts something in a servo's way (a table, a stalled jaw); ``refuse(id, address)`` makes one
ignore writes to a register (a faulty servo).

Physics time comes from the passed ``clock`` (default: the system clock); pass a
``FakeClock`` to move servos only when the test says so, or ``speed_ticks_per_s=None`` to make
servos reach their goal instantly.
"""

from __future__ import annotations

import os
import select
import termios
import threading
import tty
from collections import deque
from collections.abc import Callable, Iterable

import solarian_agent.hw.feetech.protocol as P
from solarian_agent.core.clock import Clock, SystemClock
from solarian_agent.hw.feetech.protocol import STS3215, Instruction
from solarian_agent.hw.feetech.simservo import SimFault, SimServo, Thermal

FAULT_KINDS = ("no_answer", "checksum", "truncated", "garbage", "delay")
_TCGETS2 = 0x802C542A  # Linux: _IOR('T', 0x2A, struct termios2)
# termios speed constants -> bits per second (the speeds Linux names; others read as None)
_SPEEDS = {getattr(termios, f"B{b}"): b for b in (*P.BAUD_RATES, 9600)
           if hasattr(termios, f"B{b}")}
MAX_FRAMES_KEPT = 100_000  # about 15 minutes of a 50 Hz control loop

class SimulatedBus:
    """Simulated STS3215 servos answering on a pty; use as a context manager."""

    def __init__(
        self,
        ids: Iterable[int] = (1, 2, 3, 4, 5, 6),
        clock: Clock | None = None,
        speed_ticks_per_s: float | None = 3400.0,
        initial_position: int | dict[int, int] = 2048,
        poll_s: float = 0.05,
        thermal: Thermal | None = Thermal(),
    ) -> None:
        self.clock = clock or SystemClock()
        self.thermal = thermal
        self.speed_ticks_per_s = speed_ticks_per_s
        self.poll_s = poll_s
        self.servos: dict[int, SimServo] = {}
        for i in ids:
            pos = initial_position.get(i, 2048) if isinstance(initial_position, dict) \
                else initial_position
            self.servos[i] = SimServo(i, position=float(pos))
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        # what the host sent, newest last; bounded, so a simulated arm left running for hours
        # (robot.launch.py simulated_bus:=true) does not grow without end
        self._frames: deque[bytes] = deque(maxlen=MAX_FRAMES_KEPT)
        self.host_checksum_errors = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_t = self.clock.now()
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no CR/LF translation: bytes pass unchanged
        self.port_name = os.ttyname(self._slave)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> SimulatedBus:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="simbus", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        for fd in (self._master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass
        self._master = self._slave = -1

    def __enter__(self) -> SimulatedBus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ test controls

    def inject(self, servo_id: int, kind: str, count: int | None = 1,
               delay_s: float = 0.1) -> None:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {FAULT_KINDS}")
        with self._lock:
            self.servos[servo_id].faults.append(SimFault(kind, count, delay_s))

    def clear_faults(self, servo_id: int | None = None) -> None:
        with self._lock:
            for s in self.servos.values():
                if servo_id is None or s.servo_id == servo_id:
                    s.faults.clear()

    def set_error_flags(self, servo_id: int, flags: int) -> None:
        with self._lock:
            self.servos[servo_id].error_flags = flags

    def attach(self, servo_id: int, baudrate: int = 1_000_000, position: float = 2048.0
               ) -> SimServo:
        """Plug a servo in (a factory servo answers as id 1 at 1 Mbps)."""
        servo = SimServo(servo_id, position=float(position))
        servo.mem[STS3215.BAUD_RATE.address] = P.BAUD_RATES[baudrate]
        with self._lock:
            if servo_id in self.servos:
                raise ValueError(f"a servo with id {servo_id} is already on the bus")
            self.servos[servo_id] = servo
        return servo

    def detach(self, servo_id: int) -> SimServo:
        """Unplug a servo (returned, to plug in again with ``reattach``)."""
        with self._lock:
            return self.servos.pop(servo_id)

    def reattach(self, servo: SimServo) -> None:
        with self._lock:
            if servo.servo_id in self.servos:
                raise ValueError(f"a servo with id {servo.servo_id} is already on the bus")
            self.servos[servo.servo_id] = servo

    def set_baud(self, servo_id: int, baudrate: int) -> None:
        with self._lock:
            self.servos[servo_id].mem[STS3215.BAUD_RATE.address] = P.BAUD_RATES[baudrate]

    def host_baudrate(self) -> int | None:
        """The speed the host set on its end of the pseudo-terminal: a named one (B1000000),
        or one set through termios2 as pyserial sets 250000 / 128000 (None: unknown)."""
        try:
            speed = termios.tcgetattr(self._slave)[5]
        except (termios.error, OSError, ValueError):
            return None
        if speed in _SPEEDS:
            return _SPEEDS[speed]
        try:  # struct termios2: 4 flags, c_line, c_cc[19], c_ispeed, c_ospeed
            import fcntl
            import struct

            buf = fcntl.ioctl(self._slave, _TCGETS2, bytes(44))
            return int(struct.unpack("4IB19B2I", buf)[-1]) or None
        except (OSError, ValueError, struct.error):
            return None

    def obstruct(self, servo_id: int, below: float | None = None,
                 above: float | None = None) -> None:
        """Something in the way: the servo cannot go below / above these reported ticks
        (None: free that side).  Pushing against it loads and heats the servo."""
        with self._lock:
            s = self.servos[servo_id]
            off = s.homing_offset
            s.obstacle = (None if below is None else below + off,
                          None if above is None else above + off)

    def refuse(self, servo_id: int, address: int) -> None:
        """The servo acknowledges writes to ``address`` and keeps its old value."""
        with self._lock:
            self.servos[servo_id].refused.add(address)

    def register(self, servo_id: int, reg: P.Register) -> int:
        """A register's value as the servo holds it."""
        with self._lock:
            s = self.servos[servo_id]
            s.refresh_registers()
            return s.reg(reg)

    def set_position(self, servo_id: int, raw: float) -> None:
        """Move a servo by hand (as a person does with torque off)."""
        with self._lock:
            self.servos[servo_id].position = float(raw)

    def position(self, servo_id: int) -> float:
        with self._lock:
            return self.servos[servo_id].position

    def goal(self, servo_id: int) -> int:
        with self._lock:
            return self.servos[servo_id].goal

    def torque(self, servo_id: int) -> bool:
        with self._lock:
            return self.servos[servo_id].torque

    def frames(self) -> list[bytes]:
        """Every frame the host sent, in order (bad-checksum ones included)."""
        with self._lock:
            return list(self._frames)

    def clear_frames(self) -> None:
        with self._lock:
            self._frames.clear()

    def wait_frames(self, count: int, timeout: float = 1.0) -> bool:
        """Wait (bounded) until at least ``count`` frames arrived."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._frames) >= count, timeout)

    def wait_until(self, pred: Callable[[list[bytes]], bool], timeout: float = 1.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: pred(list(self._frames)), timeout)

    def goal_writes(self) -> list[tuple[int, int]]:
        """(servo id, raw goal) for every goal-position value the host put on the wire, from
        WRITE and SYNC_WRITE frames that cover address 42..43."""
        out: list[tuple[int, int]] = []
        for frame in self.frames():
            try:
                pkt = P.parse_packet(frame)
            except Exception:
                continue
            out.extend(_goal_values(pkt))
        return out

    # ------------------------------------------------------------------ the answering thread

    def _run(self) -> None:
        splitter = P.PacketSplitter()
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._master], [], [], self.poll_s)
                if not ready:
                    continue
                data = os.read(self._master, 4096)
            except (OSError, ValueError):
                if self._stop.wait(0.01):
                    break
                continue
            splitter.feed(data)
            for frame in splitter.packets():
                try:
                    self._handle(frame)
                except Exception as e:  # never let a bad frame end the bus
                    with self._lock:
                        self.errors.append(f"{type(e).__name__}: {e} for {frame.hex(' ')}")

    def _advance(self) -> None:
        now = self.clock.now()
        dt, self._last_t = now - self._last_t, now
        for s in self.servos.values():
            s.advance(dt, self.speed_ticks_per_s, self.thermal)
        if self.thermal is not None:
            total = sum(abs(s.load) for s in self.servos.values()) / 1000.0
            sag = int(self.thermal.sag_dv_at_full_load * total)
            for s in self.servos.values():
                s.sag_dv = sag

    def _handle(self, frame: bytes) -> None:
        with self._cond:
            self._frames.append(frame)
            self._cond.notify_all()
        try:
            pkt = P.parse_packet(frame)
        except Exception:
            with self._lock:
                self.host_checksum_errors += 1
            return  # a real servo ignores a corrupt instruction
        replies: list[tuple[SimServo, bytes, int]] = []
        with self._lock:
            self._advance()
            replies = self._execute(pkt)
        for servo, params, reply_id in replies:
            self._answer(servo, params, reply_id)

    def _execute(self, pkt: P.Packet) -> list[tuple[SimServo, bytes, int]]:
        """What the servos do with one frame: (servo, answer data, id it answers under)."""
        ins, sid, prm = pkt.instruction, pkt.servo_id, pkt.params
        host = self.host_baudrate()
        listening = [s for s in self.servos.values() if host is None or s.baudrate == host]
        targets = listening if sid == P.BROADCAST_ID else [
            s for s in listening if s.servo_id == sid]
        answer = sid != P.BROADCAST_ID
        out: list[tuple[SimServo, bytes, int]] = []
        if ins == Instruction.PING:  # a broadcast ping is answered by every servo
            out = [(s, b"", s.servo_id) for s in sorted(targets, key=lambda s: s.servo_id)]
        elif ins == Instruction.READ and len(prm) == 2:
            addr, n = prm
            for s in targets:
                s.refresh_registers()
                out.append((s, bytes(s.mem[addr:addr + n]), s.servo_id))
        elif ins == Instruction.WRITE and len(prm) >= 1:
            for s in targets:
                old_id = s.servo_id
                s.write_mem(prm[0], prm[1:])
                if answer:
                    out.append((s, b"", old_id))
                self._apply_id(s)
        elif ins == Instruction.REG_WRITE and len(prm) >= 1:
            for s in targets:
                s.pending = (prm[0], prm[1:])
            out = [(s, b"", s.servo_id) for s in targets] if answer else []
        elif ins == Instruction.ACTION:
            for s in targets:
                if s.pending is not None:
                    s.write_mem(*s.pending)
                    s.pending = None
                    self._apply_id(s)
        elif ins == Instruction.SYNC_READ and len(prm) >= 2:
            addr, n = prm[0], prm[1]
            by_id = {s.servo_id: s for s in listening}
            for i in prm[2:]:
                found = by_id.get(i)
                if found is not None:
                    found.refresh_registers()
                    out.append((found, bytes(found.mem[addr:addr + n]), found.servo_id))
        elif ins == Instruction.SYNC_WRITE and len(prm) >= 2:
            addr, n = prm[0], prm[1]
            body = prm[2:]
            by_id = {s.servo_id: s for s in listening}
            for k in range(0, len(body) - n, n + 1):
                dest = by_id.get(body[k])
                if dest is not None:
                    dest.write_mem(addr, body[k + 1:k + 1 + n])
                    self._apply_id(dest)
        return out

    def _apply_id(self, servo: SimServo) -> None:
        """A write to the ID register moves the servo to its new id (after it answered)."""
        new = servo.mem[STS3215.ID.address]
        if new == servo.servo_id or new > P.MAX_ID:
            servo.mem[STS3215.ID.address] = servo.servo_id
            return
        if new in self.servos:  # two servos on one id would garble each other's answers
            self.errors.append(f"servo {servo.servo_id}: id {new} is taken; id left unchanged")
            servo.mem[STS3215.ID.address] = servo.servo_id
            return
        self.servos.pop(servo.servo_id, None)
        servo.servo_id = new
        self.servos[new] = servo

    def _answer(self, servo: SimServo, params: bytes, reply_id: int) -> None:
        with self._lock:
            reply = P.status_packet(reply_id, servo.error_flags | servo.trip_flags, params)
            fault = None
            for f in servo.faults:
                if f.remaining is None or f.remaining > 0:
                    fault = f
                    if f.remaining is not None:
                        f.remaining -= 1
                    break
            servo.faults[:] = [f for f in servo.faults if f.remaining is None or f.remaining > 0]
        delay = servo.mem[STS3215.RETURN_DELAY.address] * 2e-6
        if delay and self._stop.wait(delay):  # the servo's return delay, before it answers
            return
        if fault is not None:
            if fault.kind == "no_answer":
                return
            if fault.kind == "checksum":
                reply = reply[:-1] + bytes([reply[-1] ^ 0x5A])
            elif fault.kind == "truncated":
                reply = reply[: len(reply) // 2]
            elif fault.kind == "garbage":
                reply = b"\x00\x13\xff\x42" + reply
            elif fault.kind == "delay" and self._stop.wait(fault.delay_s):
                return
        self._send(reply)

    def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self._stop.is_set():
            try:
                _, ready, _ = select.select([], [self._master], [], self.poll_s)
                if ready:
                    n = os.write(self._master, view)
                    view = view[n:]
            except (OSError, ValueError):
                return


def _goal_values(pkt: P.Packet) -> list[tuple[int, int]]:
    g = STS3215.GOAL_POSITION
    out: list[tuple[int, int]] = []

    def pick(sid: int, start: int, data: bytes) -> None:
        lo = g.address - start
        if lo >= 0 and lo + 2 <= len(data):
            out.append((sid, P.decode_value(data[lo:lo + 2], g.sign_bit)))

    if pkt.instruction in (Instruction.WRITE, Instruction.REG_WRITE) and pkt.params:
        pick(pkt.servo_id, pkt.params[0], pkt.params[1:])
    elif pkt.instruction == Instruction.SYNC_WRITE and len(pkt.params) >= 2:
        addr, n = pkt.params[0], pkt.params[1]
        body = pkt.params[2:]
        for k in range(0, len(body) - n, n + 1):
            pick(body[k], addr, body[k + 1:k + 1 + n])
    return out


__all__ = ["FAULT_KINDS", "MAX_FRAMES_KEPT", "SimServo", "SimulatedBus", "Thermal"]
