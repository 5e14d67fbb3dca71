"""What every ``solarian-agent`` command shares (ROS-free):

* :class:`CliParser`: an ``argparse`` parser whose usage errors are one line on stderr with
  exit status 2 (``solarian-agent demo: error: ... (see --help)``), and which gives every
  command, subcommand included, ``--log-level`` and ``-v`` / ``--verbose`` (``-vv``: debug);
  parsing configures the ``logging`` root from them;
* :func:`install_hint` / :func:`require`: a missing optional extra is named with the pip line
  that installs it, never a traceback;
* :func:`version`: the installed package's version (``--version``);
* :func:`number_arg`: an ``argparse`` ``type`` for a bounded number, whose refusal says what
  the option takes.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

N = TypeVar("N", int, float)

LOG_LEVELS = ("debug", "info", "warning", "error")

# an optional dependency -> the extra (or set-up) that brings it
EXTRAS: dict[str, str] = {
    "starlette": "pip install 'solarian_agent[web]'",
    "uvicorn": "pip install 'solarian_agent[web]'",
    "anthropic": "pip install 'solarian_agent[agent]'",
    "openai": "pip install 'solarian_agent[agent]'",
    "rclpy": "ROS 2 Jazzy: `make ros` in a checkout (the PyPI wheels), or source "
             "/opt/ros/jazzy/setup.bash",
}


def number_arg(parse: Callable[[str], N], accept: Callable[[N], bool], takes: str,
               out_of_range: str | None = None) -> Callable[[str], N]:
    """An argparse ``type``: ``parse`` the text (int or float) and refuse it unless
    ``accept(value)`` (NaN fails every comparison, so ``0 <= v <= 1`` refuses it too).  The
    usage error reads ``must be <takes>, got 'x'`` for what does not parse and ``must be
    <out_of_range or takes>, got x`` for a value outside the range."""
    def check(text: str) -> N:
        try:
            v = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {takes}, got {text!r}") from None
        if not accept(v):
            raise argparse.ArgumentTypeError(f"must be {out_of_range or takes}, got {text}")
        return v
    return check


class MissingExtraError(RuntimeError):
    """An optional dependency is not installed (the message names the install line)."""


def install_hint(module: str, what: str) -> str:
    top = module.split(".")[0]
    how = EXTRAS.get(top, f"pip install {top}")
    return f"{what} needs {top}, which is not installed: {how}"


def require(modules: Sequence[str], what: str) -> None:
    """Raise :class:`MissingExtraError` naming the first of ``modules`` that is missing."""
    for m in modules:
        try:
            found = importlib.util.find_spec(m) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtraError(install_hint(m, what))


def version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as dist_version

        try:
            return dist_version("solarian_agent")
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover
        pass
    from . import __version__

    return __version__


class CliParser(argparse.ArgumentParser):
    """See the module docstring.  ``logging_options=False`` leaves the two options out (a
    parser that is only a parent)."""

    def __init__(self, *args: Any, logging_options: bool = True, **kw: Any) -> None:
        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kw)
        if logging_options and self.add_help:
            g = self.add_argument_group("logging")
            # SUPPRESS: a subcommand's default never overwrites what its parent parsed
            g.add_argument("--log-level", choices=LOG_LEVELS, default=argparse.SUPPRESS,
                           type=str.lower,
                           help="log messages from this level up (default warning; -v info, "
                                "-vv debug)")
            g.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                           help="more output: -v progress and info logs, -vv debug")

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see --help)\n")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        ns = super().parse_args(args, namespace)
        if not hasattr(ns, "verbose"):
            ns.verbose = 0
        if not hasattr(ns, "log_level"):
            ns.log_level = None
        setup_logging(ns)
        return ns


def setup_logging(ns: argparse.Namespace) -> None:
    level_name = getattr(ns, "log_level", None)
    verbose = int(getattr(ns, "verbose", 0) or 0)
    if level_name:
        level = getattr(logging, level_name.upper())
    else:
        level = logging.DEBUG if verbose >= 2 else logging.INFO if verbose else logging.WARNING
    root = logging.getLogger()
    if not root.handlers:
        from .core.text import TerminalWriter

        # log lines carry text from models and servers: escaped like everything printed (a
        # control, bidi, zero-width or tag character is shown as its \u escape)
        logging.basicConfig(stream=TerminalWriter(sys.stderr), level=level,
                            format="%(levelname)s %(name)s: %(message)s")
    root.setLevel(level)


def fail(prog: str, message: str, code: int = 2) -> int:
    """A one-line error (control characters escaped) and its exit status."""
    from .core.text import for_terminal

    print(f"{prog}: {for_terminal(message)}", file=sys.stderr)
    return code


__all__ = ["EXTRAS", "LOG_LEVELS", "CliParser", "MissingExtraError", "fail", "install_hint",
           "require", "setup_logging", "version"]
