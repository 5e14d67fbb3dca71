"""One simulated STS3215: its register memory, its motion, and its own protection (the
servos of ``simbus.SimulatedBus``; the rules they follow are in that module's docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import solarian_agent.hw.feetech.protocol as P
from solarian_agent.hw.feetech.protocol import STS3215

FULL_LOAD_CURRENT_UNITS = 300  # Present_Current at full load: about 2 A in 6.5 mA units
# registers as a new STS3215 comes from the factory (those the simulation acts on)
_FACTORY: dict[P.Register, int] = {
    STS3215.RETURN_DELAY: 250, STS3215.MAX_TEMPERATURE: 70, STS3215.MAX_VOLTAGE: 140,
    STS3215.MIN_VOLTAGE: 40, STS3215.MAX_TORQUE_LIMIT: 1000, STS3215.P_COEFFICIENT: 32,
    STS3215.D_COEFFICIENT: 32, STS3215.I_COEFFICIENT: 0, STS3215.PROTECTION_CURRENT: 500,
    STS3215.PROTECTION_TIME: 200, STS3215.OVERLOAD_TORQUE: 80, STS3215.TORQUE_LIMIT: 1000,
    STS3215.LOCK: 1,  # locked: an EEPROM write must unlock first (see simbus)
}


@dataclass(frozen=True)
class Thermal:
    """How load heats a simulated servo (and the supply's sag under load)."""

    ambient_c: float = 30.0
    heat_c_at_full_load: float = 80.0  # steady-state rise at full load
    tau_s: float = 30.0  # thermal time constant: a stall is too hot within a minute
    sag_dv_at_full_load: float = 5.0  # supply drop per servo at full load (decivolts)


@dataclass
class SimFault:
    kind: str
    remaining: int | None  # None: until cleared
    delay_s: float = 0.0


@dataclass
class SimServo:
    """One simulated STS3215: register memory plus a continuous position."""

    servo_id: int
    position: float = 2048.0
    voltage_dv: int = 74  # decivolts: 7.4 V (SO-101 7.4 V servos; 12 V versions read 120)
    temperature_c: float = 30.0
    error_flags: int = 0  # set by tests (set_error_flags)
    trip_flags: int = 0  # set by the servo's own protection (overheat, overload)
    sag_dv: int = 0  # supply sag under the bus's load
    overload_s: float = 0.0  # how long the load has been above Overload_Torque
    obstacle: tuple[float | None, float | None] = (None, None)  # physical ticks
    refused: set[int] = field(default_factory=set)  # addresses that ignore writes
    mem: bytearray = field(default_factory=lambda: bytearray(256))
    faults: list[SimFault] = field(default_factory=list)
    pending: tuple[int, bytes] | None = None  # REG_WRITE waiting for ACTION

    def __post_init__(self) -> None:
        self.mem[STS3215.MODEL_NUMBER.address:STS3215.MODEL_NUMBER.address + 2] = \
            P.encode_value(P.STS3215_MODEL_NUMBER, 2)
        self.mem[STS3215.ID.address] = self.servo_id
        self.mem[STS3215.MIN_POSITION_LIMIT.address:STS3215.MIN_POSITION_LIMIT.address + 2] = \
            P.encode_value(0, 2)
        self.mem[STS3215.MAX_POSITION_LIMIT.address:STS3215.MAX_POSITION_LIMIT.address + 2] = \
            P.encode_value(P.MAX_TICK, 2)
        for reg, value in _FACTORY.items():
            self.mem[reg.address:reg.address + reg.size] = P.encode_value(value, reg.size)
        self.set_goal(int(round(self.position)))
        self.speed = 0.0
        self.load = 0

    @property
    def baudrate(self) -> int:
        code = self.mem[STS3215.BAUD_RATE.address]
        return next((b for b, c in P.BAUD_RATES.items() if c == code), -1)

    @property
    def torque(self) -> bool:
        return bool(self.mem[STS3215.TORQUE_ENABLE.address])

    @property
    def goal(self) -> int:
        return P.decode_value(bytes(self.mem[42:44]), STS3215.GOAL_POSITION.sign_bit)

    @property
    def homing_offset(self) -> int:
        """Register 31: the servo reports ``present = actual - offset`` (mod one turn) and
        takes goals in the same reported ticks."""
        a = STS3215.HOMING_OFFSET.address
        return P.decode_value(bytes(self.mem[a:a + 2]), STS3215.HOMING_OFFSET.sign_bit)

    def reported(self) -> int:
        pos = int(round(self.position))
        off = self.homing_offset
        return (pos - off) % P.TICKS_PER_TURN if off else min(P.MAX_TICK, max(0, pos))

    def set_goal(self, raw: int) -> None:
        self.mem[42:44] = P.encode_value(raw, 2, STS3215.GOAL_POSITION.sign_bit)

    def reg(self, reg: P.Register) -> int:
        return P.decode_value(bytes(self.mem[reg.address:reg.address + reg.size]),
                              reg.sign_bit)

    def position_limits(self) -> tuple[int, int]:
        """Min/Max_Position_Limit in reported ticks (both 0: no limit, as on the servo)."""
        lo, hi = self.reg(STS3215.MIN_POSITION_LIMIT), self.reg(STS3215.MAX_POSITION_LIMIT)
        return (0, P.MAX_TICK) if lo == hi == 0 else (lo, hi)

    def advance(self, dt: float, speed_tps: float | None, heat: Thermal | None = None
                ) -> None:
        if not self.torque:
            self.speed = 0.0
            self.load = 0
        elif dt > 0:  # no time passed (frames within one instant): nothing changes
            lo, hi = self.position_limits()
            target = float(min(hi, max(lo, min(P.MAX_TICK, max(0, self.goal))))
                           + self.homing_offset)
            err = target - self.position
            step = abs(err) if speed_tps is None else min(abs(err), speed_tps * dt)
            before = self.position
            self.position += step if err >= 0 else -step
            below, above = self.obstacle
            if below is not None:
                self.position = max(below, self.position)
            if above is not None:
                self.position = min(above, self.position)
            self.speed = (self.position - before) / dt
            # effort grows with the distance still to go, up to the torque limit
            self.load = int(min(self.reg(STS3215.TORQUE_LIMIT),
                                abs(target - self.position) * 4 + 30))
        if heat is not None and dt > 0:
            self._protect(dt, heat)

    def _protect(self, dt: float, heat: Thermal) -> None:
        """Heating under load and the servo's own overheat / overload protection."""
        t_eq = heat.ambient_c + heat.heat_c_at_full_load * abs(self.load) / 1000.0
        self.temperature_c += (t_eq - self.temperature_c) * (1.0 - math.exp(-dt / heat.tau_s))
        if self.temperature_c >= self.mem[STS3215.MAX_TEMPERATURE.address]:
            self._trip(0x04)
        elif self.trip_flags & 0x04:
            self.trip_flags &= ~0x04  # cooled below the limit
        limit = self.reg(STS3215.TORQUE_LIMIT) * self.mem[STS3215.OVERLOAD_TORQUE.address] / 100
        if self.torque and abs(self.load) >= limit:
            self.overload_s += dt
            if self.overload_s >= self.mem[STS3215.PROTECTION_TIME.address] * 0.01:
                self._trip(0x20)
        else:
            self.overload_s = 0.0

    def _trip(self, flag: int) -> None:
        self.trip_flags |= flag
        self.mem[STS3215.TORQUE_ENABLE.address] = 0
        self.speed, self.load, self.overload_s = 0.0, 0, 0.0

    def refresh_registers(self) -> None:
        m = self.mem
        pos = self.reported()
        m[56:58] = P.encode_value(pos, 2, 15)
        spd = int(max(-32767, min(32767, round(self.speed))))
        m[58:60] = P.encode_value(spd, 2, 15)
        load = int(max(-1023, min(1023, self.load)))
        m[60:62] = P.encode_value(load, 2, 10)
        m[62] = max(0, self.voltage_dv - self.sag_dv) & 0xFF
        m[63] = int(round(self.temperature_c)) & 0xFF
        m[65] = (self.error_flags | self.trip_flags) & 0xFF
        m[66] = 1 if abs(self.goal - pos) > 1 and self.torque else 0
        m[69:71] = P.encode_value(round(abs(self.load) * FULL_LOAD_CURRENT_UNITS / 1000), 2)

    def write_mem(self, address: int, data: bytes) -> None:
        for k, b in enumerate(data):
            a = address + k
            if 56 <= a <= 70 or a in (0, 1, 2, 3, 4):  # read-only: a real servo ignores it
                continue
            if a < STS3215.EEPROM_END and self.mem[STS3215.LOCK.address]:
                continue  # EEPROM while locked: acknowledged, not taken
            if a in self.refused:
                continue
            if a == STS3215.TORQUE_ENABLE.address and b:
                self.trip_flags &= ~0x20  # torque on again clears an overload trip
            if a < 256:
                self.mem[a] = b
