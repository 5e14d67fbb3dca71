"""First-day tools: find the arm's serial port, and give each new servo its id and baud rate.

``find_port`` lists the serial ports, asks the user to unplug the arm's USB cable, lists them
again and names the one that vanished (the way LeRobot's ``find_port`` does).

``setup_motor`` works with exactly one servo on the bus (new STS3215 servos all answer as id 1
at 1 Mbps, so a chain of new servos cannot be told apart): it finds the servo at whichever
baud rate it listens (a broadcast PING at each rate), switches its torque off, unlocks its
EEPROM, writes the joint's id and then the baud rate, and pings it at the new id and rate to
verify, reading its model number.  The arm's own ids are ``shoulder_pan`` 1 .. ``gripper`` 6.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import solarian_agent.hw.feetech.protocol as P
from solarian_agent.hw.errors import BusError, DeviceNotFoundError, HardwareError
from solarian_agent.hw.feetech.bus import FeetechBus, PortFactory
from solarian_agent.hw.feetech.protocol import STS3215

PORT_PATTERNS = ("/dev/serial/by-id/*", "/dev/ttyACM*", "/dev/ttyUSB*", "/dev/tty.usbmodem*",
                 "/dev/tty.usbserial*", "/dev/cu.usbmodem*")
# the order rates are tried in: the arm's own first, then the factory / common ones
BAUD_ORDER = (1_000_000, 500_000, 115_200, 250_000, 128_000, 57_600, 38_400, 19_200)


class SetupError(HardwareError):
    """A set-up step cannot go on; the message says what to do."""


# ------------------------------------------------------------------------------ find-port
def list_ports(patterns: Iterable[str] = PORT_PATTERNS) -> list[str]:
    """Serial ports that exist now (a link whose device is gone does not count)."""
    out: list[str] = []
    for pat in patterns:
        out += [p for p in sorted(glob.glob(pat)) if os.path.exists(p) and p not in out]
    return out


def describe_port(port: str) -> str:
    real = os.path.realpath(port)
    return port if real == port else f"{port} -> {real}"


def find_port(ask: Callable[[str], str], patterns: Iterable[str] = PORT_PATTERNS) -> str:
    """The port that vanishes when the user unplugs the arm (``ask`` waits for Enter)."""
    pats = list(patterns)
    before = list_ports(pats)
    real = {p: os.path.realpath(p) for p in before}  # resolved while the links still exist
    if not before:
        raise DeviceNotFoundError(
            "no serial ports at all: plug the arm's USB cable in (and power the servos); on "
            "Linux check `dmesg | tail` for a ch341 / cdc_acm device")
    ask("Unplug the arm's USB cable from the computer, then press Enter: ")
    after = set(list_ports(pats))
    gone = [p for p in before if p not in after]
    if not gone:
        raise DeviceNotFoundError(
            "no port vanished: was the USB cable unplugged from the computer? (Unplugging "
            "the servo power only is not enough.)")
    by_id = [p for p in gone if "/by-id/" in p]  # the name that survives replugging
    devices = {real[p] for p in gone}
    if len(devices) > 1:
        raise DeviceNotFoundError(
            "more than one port vanished (" + ", ".join(gone) + "): unplug only the arm")
    return by_id[0] if by_id else gone[0]


# ------------------------------------------------------------------------------ setup-motors
@dataclass(frozen=True)
class FoundServo:
    servo_id: int
    baudrate: int


@dataclass(frozen=True)
class SetupResult:
    joint: str
    old_id: int
    old_baudrate: int
    servo_id: int
    baudrate: int
    model_number: int


def _bus(port: str, baudrate: int, timeout_s: float, factory: PortFactory | None
         ) -> FeetechBus:
    bus = FeetechBus(port, baudrate, timeout_s=timeout_s, retries=1, port_factory=factory)
    bus.connect()
    return bus


def find_single_servo(port: str, bauds: Sequence[int] = BAUD_ORDER, timeout_s: float = 0.03,
                      factory: PortFactory | None = None) -> FoundServo:
    """The one servo on the bus, at whichever rate it answers."""
    for baud in bauds:
        bus = _bus(port, baud, timeout_s, factory)
        try:
            ids = bus.broadcast_ping()
        finally:
            bus.disconnect()
        if len(ids) > 1:
            raise SetupError(f"{len(ids)} servos answer at {baud} baud (ids "
                             f"{', '.join(map(str, ids))}): connect only the one to set up")
        if ids:
            return FoundServo(ids[0], baud)
    raise DeviceNotFoundError(
        f"no servo answers on {port} at any baud rate ({', '.join(map(str, bauds))}): check "
        "that exactly one servo is cabled to the adapter board and the supply is on")


def setup_motor(port: str, joint: str, servo_id: int, baudrate: int = 1_000_000,
                timeout_s: float = 0.03, factory: PortFactory | None = None) -> SetupResult:
    """Give the one servo on the bus ``servo_id`` and ``baudrate``; verified by PING."""
    if not 0 <= servo_id <= P.MAX_ID:
        raise SetupError(f"servo id {servo_id} is outside 0..{P.MAX_ID}")
    if baudrate not in P.BAUD_RATES:
        raise SetupError(f"baud rate {baudrate} is not one an STS3215 takes: "
                         f"{', '.join(map(str, P.BAUD_RATES))}")
    found = find_single_servo(port, timeout_s=timeout_s, factory=factory)
    bus = _bus(port, found.baudrate, timeout_s, factory)
    try:
        bus.write_register(found.servo_id, STS3215.TORQUE_ENABLE, 0)
        bus.write_register(found.servo_id, STS3215.LOCK, 0)  # EEPROM writable
        if found.servo_id != servo_id:
            bus.write_register(found.servo_id, STS3215.ID, servo_id)
        if found.baudrate != baudrate:
            bus.write_register(servo_id, STS3215.BAUD_RATE, P.BAUD_RATES[baudrate])
    except BusError as e:
        raise SetupError(f"{joint}: writing id {servo_id} / {baudrate} baud to the servo found "
                         f"as id {found.servo_id} at {found.baudrate} baud failed: {e}") from e
    finally:
        bus.disconnect()
    bus = _bus(port, baudrate, timeout_s, factory)
    try:
        bus.ping(servo_id)
        model = bus.read_register(servo_id, STS3215.MODEL_NUMBER)
        bus.write_register(servo_id, STS3215.LOCK, 1)
    except BusError as e:
        raise SetupError(f"{joint}: the servo does not answer as id {servo_id} at {baudrate} "
                         f"baud after the set-up ({e}); run setup-motors for it again") from e
    finally:
        bus.disconnect()
    return SetupResult(joint, found.servo_id, found.baudrate, servo_id, baudrate, int(model))


__all__ = ["BAUD_ORDER", "FoundServo", "PORT_PATTERNS", "SetupError", "SetupResult",
           "describe_port", "find_port", "find_single_servo", "list_ports", "setup_motor"]
