"""FeetechBus over pyserial against the pty sim: faults, retries, timeouts, named errors."""

from __future__ import annotations

import pytest
from hw_helpers import TIMEOUT_S, settle

from solarian_agent.hw.errors import (
    BusError,
    ChecksumError,
    DeviceAlreadyConnectedError,
    DeviceNotConnectedError,
    DeviceNotFoundError,
    OverloadError,
    ServoStatusError,
    ServoTimeoutError,
    VoltageError,
    decode_status_flags,
)
from solarian_agent.hw.feetech import FeetechBus
from solarian_agent.hw.feetech import protocol as P
from solarian_agent.hw.feetech.simbus import SimulatedBus


def _pings(sim: SimulatedBus, servo_id: int) -> int:
    return sum(1 for f in sim.frames() if f == P.ping_packet(servo_id))


def test_servo_that_does_not_answer_times_out_after_bounded_retries(
        sim: SimulatedBus, bus: FeetechBus) -> None:
    sim.inject(4, "no_answer", count=None)
    with pytest.raises(ServoTimeoutError) as ei:
        bus.ping(4)
    e = ei.value
    assert e.servo_id == 4
    assert "servo 4" in str(e) and "PING" in str(e) and "3 attempts" in str(e)
    assert _pings(sim, 4) == 3  # 1 try + 2 retries, then a named fault (no silent skip)
    assert bus.stats.timeouts == 3 and bus.stats.faults == 1
    sim.clear_faults(4)
    assert bus.ping(4) == 0  # the bus is usable again


def test_single_lost_answer_is_retried(sim: SimulatedBus, bus: FeetechBus) -> None:
    sim.inject(2, "no_answer", count=1)
    assert bus.read(2, 56, 2) == b"\x00\x08"
    assert bus.stats.retries == 1 and bus.stats.faults == 0


def test_checksum_error_retried_then_fault(sim: SimulatedBus, bus: FeetechBus) -> None:
    sim.inject(1, "checksum", count=1)
    assert bus.read(1, 56, 2) == b"\x00\x08"
    assert bus.stats.checksum_errors == 1
    sim.inject(1, "checksum", count=None)
    with pytest.raises(ChecksumError, match=r"checksum .*gave up after 3 attempts"):
        bus.read(1, 56, 2)


def test_truncated_answer_and_noise(sim: SimulatedBus, bus: FeetechBus) -> None:
    sim.inject(5, "truncated", count=1)
    assert bus.ping(5) == 0
    assert bus.stats.timeouts == 1
    sim.inject(5, "garbage", count=1)  # noise before a good answer: resync, no retry
    retries = bus.stats.retries
    assert bus.read(5, 56, 2) == b"\x00\x08"
    assert bus.stats.retries == retries


def test_late_answer_does_not_confuse_the_next_transaction(
        sim: SimulatedBus, bus: FeetechBus) -> None:
    sim.inject(3, "delay", count=1, delay_s=TIMEOUT_S * 1.5)
    # first attempt times out, the late answer arrives during the retry and is taken or dropped
    assert bus.read(3, 56, 2) == b"\x00\x08"
    assert bus.read(2, 56, 2) == b"\x00\x08"
    got = bus.sync_read(56, 2, [1, 2, 3])
    assert set(got) == {1, 2, 3}


def test_sync_read_names_the_silent_servo(sim: SimulatedBus, bus: FeetechBus) -> None:
    sim.inject(3, "no_answer", count=None)
    with pytest.raises(ServoTimeoutError, match=r"servo 3 did not answer SYNC_READ") as ei:
        bus.sync_read(56, 2, [1, 2, 3, 4, 5, 6])
    assert ei.value.servo_id == 3


def test_voltage_error_is_a_named_status_error(sim: SimulatedBus, bus: FeetechBus) -> None:
    sim.set_error_flags(2, 0x01)
    with pytest.raises(VoltageError) as ei:
        bus.read(2, 62, 1)
    e = ei.value
    assert isinstance(e, ServoStatusError) and e.servo_id == 2
    assert e.flags == ("input voltage error",)
    assert e.data == bytes([74])  # the reading still came with it
    assert "servo 2 reports input voltage error" in str(e)
    assert bus.stats.retries == 0  # a servo that answered is not retried
    # sync reads return the flags instead of raising
    got = bus.sync_read(62, 1, [1, 2])
    assert got[2].error == 0x01 and got[1].error == 0
    sim.set_error_flags(2, 0x04 | 0x20)
    assert bus.ping(2) == 0x24  # PING reports the status byte
    with pytest.raises(OverloadError) as ei2:
        bus.read(2, 56, 2)
    assert ei2.value.flags == ("overheat", "overload")
    assert decode_status_flags(0x24) == ("overheat", "overload")
    assert decode_status_flags(0x40) == ("unknown flag 0x40",)


def test_connection_state_errors(sim: SimulatedBus) -> None:
    b = FeetechBus(sim.port_name, timeout_s=TIMEOUT_S)
    with pytest.raises(DeviceNotConnectedError, match="not connected"):
        b.ping(1)
    b.connect()
    with pytest.raises(DeviceAlreadyConnectedError):
        b.connect()
    b.disconnect()
    with pytest.raises(DeviceNotConnectedError):
        b.read(1, 56, 2)
    with pytest.raises(DeviceNotFoundError, match=r"/dev/nonexistent-tty.*by-id"):
        FeetechBus("/dev/nonexistent-tty").connect()


def test_sim_ignores_corrupt_instructions(sim: SimulatedBus, bus: FeetechBus) -> None:
    port = bus._port  # white-box: put a corrupt frame straight on the wire
    assert port is not None
    port.write(P.ping_packet(1)[:-1] + b"\x00")
    settle(sim, bus)
    assert sim.host_checksum_errors == 1
    assert not sim.errors


def test_port_failure_is_a_bus_error(sim: SimulatedBus, bus: FeetechBus) -> None:
    port = bus._port
    assert port is not None
    port.close()  # the adapter vanished under the bus
    with pytest.raises(BusError, match="failed"):
        bus.ping(1)
