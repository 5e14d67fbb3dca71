"""The core layer's exception hierarchy.  Errors are named after the state that caused them."""

from __future__ import annotations


class CoreError(Exception):
    """Base of every error the ROS-free core raises."""


class ConfigError(CoreError):
    """An invalid configuration value; the message names its YAML path and what is allowed."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class TransportError(CoreError):
    """A name or type mismatch on the in-process transport."""


class ServiceUnavailableError(TransportError):
    """No server is registered under the called service or action name."""


class ServiceTimeoutError(TransportError):
    """A service or action call did not answer within its timeout."""


MAX_REASON_CHARS = 1000


class ToolCallRejected(CoreError):
    """A planner tool call the harness refuses; ``reason`` goes back to the model at once.

    A reason is bounded (``MAX_REASON_CHARS``): the values it names are quoted as a short
    prefix and their length where it is made (``core.text.quote_prefix``); a reason still
    longer is cut here, as the last line of defence, so nothing unbounded is echoed into the
    conversation."""

    def __init__(self, reason: str) -> None:
        if len(reason) > MAX_REASON_CHARS:
            reason = (reason[:MAX_REASON_CHARS - 80]
                      + f"… [refusal cut: {len(reason)} characters in all]")
        self.reason = reason
        super().__init__(reason)


class StaleGenerationError(ToolCallRejected):
    """A command carries a generation older than the executor's (cancel/reset/takeover)."""


class StaleObservationError(ToolCallRejected):
    """A point refers to an image that is too old or taken before the robot last moved."""


class SkillFailed(CoreError):
    """Raised by ``Skill.fail(reason)``: ends the skill as FAILED wherever it runs."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class BudgetExhausted(CoreError):
    """A run used up ``max_turns`` or ``max_minutes``."""
