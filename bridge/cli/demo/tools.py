"""The demo's server tool: run by the bridge itself, beside the page's frontend tools."""

from __future__ import annotations

from datetime import datetime


def get_time() -> str:
    """The current date and time where the bridge runs (its own time zone)."""
    now = datetime.now().astimezone()
    return now.strftime("%A %d %B %Y, %H:%M:%S ") + (now.tzname() or "local time")


#: What ``agui-bridge demo`` hands ``create_app(config, tools=…)``.
DEMO_TOOLS = (get_time,)
