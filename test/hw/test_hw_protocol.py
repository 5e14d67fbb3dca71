"""Feetech protocol: frames byte for byte, against hand-computed bytes, on and off the wire."""

from __future__ import annotations

import pytest
from hw_helpers import settle

from solarian_agent.hw.errors import ChecksumError, PacketError
from solarian_agent.hw.feetech import FeetechBus
from solarian_agent.hw.feetech import protocol as P
from solarian_agent.hw.feetech.simbus import SimulatedBus

# Hand-computed: CHK = ~(ID + LEN + INSTR + params) & 0xFF
PING_1 = bytes.fromhex("ff ff 01 02 01 fb")  # 1+2+1 = 0x04 -> 0xfb
READ_1_POS = bytes.fromhex("ff ff 01 04 02 38 02 be")  # 1+4+2+56+2 = 0x41 -> 0xbe
WRITE_1_GOAL_2048 = bytes.fromhex("ff ff 01 05 03 2a 00 08 c4")  # 1+5+3+42+0+8 = 0x3b -> 0xc4
SYNC_READ_POS_1_2 = bytes.fromhex("ff ff fe 06 82 38 02 01 02 3c")  # 0x1c3 -> 0x3c
# goal 2048 (00 08) to id 1, 1024 (00 04) to id 2; LEN = 2 * (2 + 1) + 4 = 10
SYNC_WRITE_GOALS = bytes.fromhex("ff ff fe 0a 83 2a 02 01 00 08 02 00 04 39")  # 0x1c6 -> 0x39
STATUS_1_POS_2048 = bytes.fromhex("ff ff 01 04 00 00 08 f2")  # 1+4+0+0+8 = 0x0d -> 0xf2


def test_builders_match_hand_computed_frames() -> None:
    assert P.ping_packet(1) == PING_1
    assert P.read_packet(1, 56, 2) == READ_1_POS
    assert P.write_packet(1, 42, P.encode_value(2048, 2)) == WRITE_1_GOAL_2048
    assert P.sync_read_packet(56, 2, [1, 2]) == SYNC_READ_POS_1_2
    assert P.sync_write_packet(42, 2, {1: b"\x00\x08", 2: b"\x00\x04"}) == SYNC_WRITE_GOALS
    assert P.status_packet(1, 0, b"\x00\x08") == STATUS_1_POS_2048


def test_parse_and_checksum() -> None:
    pkt = P.parse_packet(STATUS_1_POS_2048)
    assert (pkt.servo_id, pkt.error, pkt.params) == (1, 0, b"\x00\x08")
    with pytest.raises(ChecksumError, match="checksum"):
        P.parse_packet(STATUS_1_POS_2048[:-1] + b"\x00")
    with pytest.raises(PacketError):
        P.parse_packet(b"\xff\xff\x01\x09\x00\x00")


def test_sign_magnitude_encoding() -> None:
    assert P.encode_value(-5, 2, sign_bit=15) == bytes([5, 0x80])
    assert P.decode_value(bytes([5, 0x80]), sign_bit=15) == -5
    assert P.decode_value(P.encode_value(-300, 2, sign_bit=10), sign_bit=10) == -300
    assert P.decode_value(b"\xff\x0f") == 4095
    with pytest.raises(ValueError):
        P.encode_value(70000, 2)
    with pytest.raises(ValueError):
        P.ping_packet(0xFE)  # no PING to broadcast


def test_splitter_resyncs_on_noise() -> None:
    sp = P.PacketSplitter()
    sp.feed(b"\x00\x13\xff" + STATUS_1_POS_2048[:3])
    assert sp.packets() == []
    sp.feed(STATUS_1_POS_2048[3:] + PING_1)
    assert sp.packets() == [STATUS_1_POS_2048, PING_1]
    assert sp.discarded == 3


def test_wire_time_of_six_servo_sync_read() -> None:
    n = P.sync_read_wire_bytes(6, 2)  # request 14 bytes + 6 answers of 8 bytes
    assert n == 14 + 6 * 8
    assert P.wire_time_s(n, 1_000_000) == pytest.approx(0.62e-3)


def test_frames_on_the_wire_are_byte_exact(sim: SimulatedBus, bus: FeetechBus) -> None:
    assert bus.ping(1) == 0
    assert bus.read(1, 56, 2) == b"\x00\x08"  # present position 2048, as the sim answered
    bus.write(1, 42, P.encode_value(2048, 2))
    got = bus.sync_read(56, 2, [1, 2])
    assert {i: r.data for i, r in got.items()} == {1: b"\x00\x08", 2: b"\x00\x08"}
    bus.sync_write(42, 2, {1: b"\x00\x08", 2: b"\x00\x04"})
    settle(sim, bus)
    assert sim.frames()[:5] == [PING_1, READ_1_POS, WRITE_1_GOAL_2048, SYNC_READ_POS_1_2,
                                SYNC_WRITE_GOALS]
    assert sim.goal(2) == 1024
    assert sim.host_checksum_errors == 0


def test_register_helpers(sim: SimulatedBus, bus: FeetechBus) -> None:
    assert bus.read_register(3, P.STS3215.MODEL_NUMBER) == P.STS3215_MODEL_NUMBER
    bus.write_register(3, P.STS3215.TORQUE_ENABLE, 1)
    assert sim.torque(3)
    with pytest.raises(ValueError, match="read-only"):
        bus.write_register(3, P.STS3215.PRESENT_POSITION, 5)
    bus.sync_write_register(P.STS3215.GOAL_POSITION, {3: 1000, 4: 3000})
    settle(sim, bus)
    assert (sim.goal(3), sim.goal(4)) == (1000, 3000)
    assert sim.position(3) == 1000  # torque on, instant servo
    assert sim.position(4) == 2048  # torque off: the goal does not move it


def test_a_write_may_go_to_every_servo_at_once_but_not_past_the_broadcast_id() -> None:
    pkt = P.write_packet(P.BROADCAST_ID, 40, b"\x01")
    assert pkt[2] == P.BROADCAST_ID
    assert P.write_packet(1, 40, b"\x01")[2] == 1
    with pytest.raises(ValueError, match="servo id 255 outside 0..254"):
        P.write_packet(P.BROADCAST_ID + 1, 40, b"\x01")
