"""Feetech protocol: frames byte for byte, against hand-computed bytes, on and off the wire."""

from __future__ import annotations

from itertools import pairwise

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


# --------------------------------------------------------------------------- exact edges
# What a real bus and real values produce at the edges: ids 0 and 0xFD, values at exactly the
# sign bit, a frame of exactly MAX_PACKET bytes, and noise in the byte stream.  Messages and
# exception attributes are checked whole: a ROS shell puts them into diagnostics verbatim.


def test_the_control_table_lists_each_register_once_in_address_order() -> None:
    regs = P.STS3215.all()
    assert len(regs) == 33
    assert (regs[0], regs[-1]) == (P.STS3215.MODEL_NUMBER, P.STS3215.PRESENT_CURRENT)
    assert all(getattr(P.STS3215, r.name.upper()) is r for r in regs)
    assert all(a.address + a.size <= b.address for a, b in pairwise(regs))  # no overlap
    assert [r.name for r in regs if r.sign_bit is not None] == [
        "homing_offset", "goal_position", "goal_speed", "present_position", "present_speed",
        "present_load", "present_current"]


def test_sign_magnitude_at_exactly_the_sign_bit() -> None:
    assert P.encode_value(0, 2, sign_bit=15) == b"\x00\x00"  # zero is +0, never -0
    assert P.encode_value(1, 2, sign_bit=15) == b"\x01\x00"
    assert P.encode_value(-1, 2, sign_bit=15) == b"\x01\x80"
    assert P.encode_value(32767, 2, sign_bit=15) == b"\xff\x7f"
    assert P.encode_value(-32767, 2, sign_bit=15) == b"\xff\xff"
    assert P.encode_value(-2047, 2, sign_bit=11) == b"\xff\x0f"  # homing offset
    assert P.encode_value(1023, 2, sign_bit=10) == b"\xff\x03"  # load
    for value, sign_bit in ((32768, 15), (-32768, 15), (32769, 15), (2048, 11), (-1024, 10)):
        with pytest.raises(ValueError) as e:
            P.encode_value(value, 2, sign_bit=sign_bit)
        assert str(e.value) == (f"value {value} does not fit a sign-magnitude field with sign "
                                f"bit {sign_bit}")
    assert P.decode_value(b"\x00\x80", sign_bit=15) == 0  # -0 from a servo reads as 0
    assert P.decode_value(b"\xff\x7f", sign_bit=15) == 32767
    assert P.decode_value(b"\xff\xff", sign_bit=15) == -32767
    assert P.decode_value(b"\xff\x07", sign_bit=10) == -1023


def test_unsigned_values_at_exactly_the_field_size() -> None:
    assert P.encode_value(0, 1) == b"\x00"
    assert P.encode_value(255, 1) == b"\xff"
    assert P.encode_value(65535, 2) == b"\xff\xff"
    for value, size in ((65536, 2), (256, 1), (-1, 1)):
        with pytest.raises(ValueError) as e:  # ValueError, not to_bytes's OverflowError
            P.encode_value(value, size)
        assert str(e.value) == f"value {value} does not fit {size} unsigned byte(s)"


def test_ids_zero_and_0xfd_are_servos_0xfe_is_not() -> None:
    assert P.ping_packet(0) == bytes.fromhex("ff ff 00 02 01 fc")  # 0+2+1 = 0x03 -> 0xfc
    assert P.status_packet(0) == bytes.fromhex("ff ff 00 02 00 fd")  # 0+2+0 = 0x02 -> 0xfd
    # 0xfd+4+2+0x38+2 = 0x13d -> 0xc2
    assert P.read_packet(P.MAX_ID, 56, 2) == bytes.fromhex("ff ff fd 04 02 38 02 c2")
    # 0xfe+6+0x82+0x38+2+0+0xfd = 0x2bd -> 0x42
    assert P.sync_read_packet(56, 2, [0, P.MAX_ID]) == bytes.fromhex(
        "ff ff fe 06 82 38 02 00 fd 42")
    for bad in (-1, P.BROADCAST_ID):
        with pytest.raises(ValueError) as e:
            P.ping_packet(bad)
        assert str(e.value) == f"servo id {bad} outside 0..253"


def test_status_packet_defaults_to_no_error_and_no_data() -> None:
    assert P.status_packet(1) == bytes.fromhex("ff ff 01 02 00 fc")  # 1+2+0 = 0x03 -> 0xfc


def test_a_packet_of_exactly_max_packet_bytes_and_one_more() -> None:
    pkt = P.build_packet(1, P.Instruction.WRITE, bytes(244))
    assert len(pkt) == P.MAX_PACKET == 250
    assert pkt[:5] == bytes.fromhex("ff ff 01 f6 03")  # LEN = 244 + 2
    assert pkt[-1] == 0x05  # 1+0xf6+3 = 0xfa -> 0x05
    with pytest.raises(ValueError) as e:
        P.build_packet(1, P.Instruction.WRITE, bytes(245))
    assert str(e.value) == "packet of 251 bytes exceeds the 250-byte limit"


def test_sync_write_names_the_servo_with_the_wrong_payload_size() -> None:
    with pytest.raises(ValueError) as e:
        P.sync_write_packet(42, 2, {1: b"\x00\x08", 2: b"\x00"})
    assert str(e.value) == "sync write to servo 2: 1 bytes, expected 2"


def test_parse_errors_name_the_bytes_and_the_servo() -> None:
    with pytest.raises(PacketError) as pe:  # six bytes, but no header
        P.parse_packet(bytes.fromhex("00 ff 01 02 01 fb"))
    assert (str(pe.value), pe.value.servo_id) == ("not a packet: 00 ff 01 02 01 fb", None)
    with pytest.raises(PacketError) as pe:  # a header, but too short
        P.parse_packet(b"\xff\xff\x01")
    assert str(pe.value) == "not a packet: ff ff 01"
    with pytest.raises(PacketError) as pe:
        P.parse_packet(bytes.fromhex("ff ff 07 09 00 00"))
    assert (str(pe.value), pe.value.servo_id) == (
        "packet length byte 9 does not match the frame of 6 bytes: ff ff 07 09 00 00", 7)
    with pytest.raises(ChecksumError) as ce:
        P.parse_packet(STATUS_1_POS_2048[:-1] + b"\x00")
    assert (str(ce.value), ce.value.servo_id) == (
        "checksum 0x00 != 0xf2 in ff ff 01 04 00 00 08 00", 1)


def test_splitter_keeps_a_trailing_ff_as_half_a_header() -> None:
    sp = P.PacketSplitter()
    sp.feed(b"\xff")
    assert (sp.packets(), sp.discarded, sp.pending()) == ([], 0, 1)
    sp = P.PacketSplitter()
    sp.feed(b"\x00\x13\xff")
    assert (sp.packets(), sp.discarded, sp.pending()) == ([], 2, 1)
    sp.feed(PING_1[1:])
    assert (sp.packets(), sp.discarded, sp.pending()) == ([PING_1], 2, 0)
    sp.feed(b"\x01\x02\x03")  # junk without an 0xFF goes entirely
    assert (sp.packets(), sp.discarded, sp.pending()) == ([], 5, 0)


def test_splitter_counts_every_stretch_of_junk() -> None:
    sp = P.PacketSplitter()
    sp.feed(b"\x01\x02" + PING_1 + b"\x03" + STATUS_1_POS_2048 + b"\x04\x05\x06")
    assert (sp.packets(), sp.discarded, sp.pending()) == ([PING_1, STATUS_1_POS_2048], 6, 0)


def test_splitter_decides_on_the_fourth_byte() -> None:
    sp = P.PacketSplitter()
    sp.feed(b"\xff\xff\xff\x01")  # FF FF FF: the first FF is noise, known with 4 bytes in
    assert (sp.packets(), sp.discarded, sp.pending()) == ([], 1, 3)
    sp.feed(PING_1[3:])
    assert (sp.packets(), sp.discarded, sp.pending()) == ([PING_1], 1, 0)
    sp = P.PacketSplitter()
    sp.feed(b"\xff\xff\x01\x00")  # length byte 0: not a packet, known with 4 bytes in
    assert (sp.packets(), sp.discarded, sp.pending()) == ([], 4, 0)
    sp = P.PacketSplitter()
    sp.feed(b"\xff\xff\x01")  # a partial header waits
    assert (sp.packets(), sp.discarded, sp.pending()) == ([], 0, 3)


def test_splitter_goes_on_after_extra_ffs_in_the_same_chunk() -> None:
    sp = P.PacketSplitter()
    sp.feed(b"\xff\xff\xff" + PING_1)
    assert (sp.packets(), sp.discarded, sp.pending()) == ([PING_1], 3, 0)


def test_splitter_skips_a_bad_length_byte_and_goes_on() -> None:
    sp = P.PacketSplitter()
    # junk, a header with length byte 1 (< 2: impossible), the rest of that junk, a real packet
    sp.feed(b"\x00" + b"\xff\xff\x01\x01" + PING_1)
    assert (sp.packets(), sp.discarded, sp.pending()) == ([PING_1], 5, 0)
    sp.feed(b"\xff\xff\x05\x00" + STATUS_1_POS_2048)  # length byte 0
    assert (sp.packets(), sp.discarded, sp.pending()) == ([STATUS_1_POS_2048], 9, 0)


def test_splitter_frames_an_answer_of_exactly_max_packet_bytes() -> None:
    big = P.status_packet(P.MAX_ID, 0, bytes(244))
    assert len(big) == P.MAX_PACKET
    assert big[-1] == 0x0C  # 0xfd+0xf6+0 = 0x1f3 -> 0x0c
    sp = P.PacketSplitter()
    sp.feed(big[:100])
    assert (sp.packets(), sp.pending()) == ([], 100)
    sp.feed(big[100:] + PING_1[:2])
    assert (sp.packets(), sp.discarded, sp.pending()) == ([big], 0, 2)
    pkt = P.parse_packet(big)
    assert (pkt.servo_id, pkt.error, pkt.params) == (P.MAX_ID, 0, bytes(244))


def test_splitter_drops_a_length_byte_no_packet_can_have_and_finds_the_answers_behind_it() -> None:
    """A noisy length byte above 246 (a packet of more than MAX_PACKET bytes) on a real bus:
    the splitter resyncs at once instead of waiting for up to 255 bytes and swallowing the
    real answers until a timeout."""
    sp = P.PacketSplitter()
    sp.feed(b"\xff\xff\x01\xfa" + STATUS_1_POS_2048 + STATUS_1_POS_2048)
    assert (sp.packets(), sp.discarded, sp.pending()) == (
        [STATUS_1_POS_2048, STATUS_1_POS_2048], 4, 0)
    # the longest packet there can be is still framed (length byte 246: 250 bytes)
    big = P.status_packet(1, 0, bytes(244))
    sp.feed(b"\xff\xff\x01\xf7" + big)  # 247: one byte too long
    assert (sp.packets(), sp.discarded, sp.pending()) == ([big], 8, 0)
