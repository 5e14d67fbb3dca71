"""The local OpenAI-compatible model server as a process the test owns (its own process
group, killed and reaped when the test ends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest


@pytest.fixture
def local_server() -> Iterator[Callable[..., str]]:
    """``local_server(quirks="no_usage", behaviour="good")`` starts one and returns its
    ``base_url`` (``http://127.0.0.1:PORT/v1``)."""
    procs: list[subprocess.Popen[str]] = []

    def start(quirks: str = "", behaviour: str = "good") -> str:
        p = subprocess.Popen([sys.executable, "-m", "solarian_agent.testing.local_model_server",
                              "--quirks", quirks, "--behaviour", behaviour],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             start_new_session=True)
        procs.append(p)
        assert p.stdout is not None
        line = p.stdout.readline()  # the server prints it once it listens
        assert line.startswith("listening on http://127.0.0.1:"), line
        return line.split()[-1] + "/v1"

    yield start
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
