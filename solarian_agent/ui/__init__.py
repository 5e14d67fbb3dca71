"""Front ends: the operator panel (web), the terminal chat, the episode viewer and
``attach-logs``.  Each talks to the agent only through :class:`~.link.AgentLink`.

Entry points for the CLI: :func:`~.chat_cli.main_chat`, :func:`~.viewer.main_view_episode`,
:func:`~.attach_logs.main_attach_logs`, and :func:`~.panel.serve_panel` for the demo.
Imports are lazy so ``solarian_agent.ui`` loads without starlette / uvicorn installed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["main_attach_logs", "main_chat", "main_view_episode", "serve_panel"]


def __getattr__(name: str) -> Any:
    if name == "serve_panel":
        from .panel import serve_panel

        return serve_panel
    if name == "main_chat":
        from .chat_cli import main_chat

        return main_chat
    if name == "main_view_episode":
        from .viewer import main_view_episode

        return main_view_episode
    if name == "main_attach_logs":
        from .attach_logs import main_attach_logs

        return main_attach_logs
    raise AttributeError(name)
