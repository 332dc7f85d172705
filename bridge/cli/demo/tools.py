"""The demo's server tools: run by the bridge itself, beside the page's frontend tools."""

from __future__ import annotations

from datetime import datetime

from bridge.serve.tools.python_tools import requires_approval


def get_time() -> str:
    """The current date and time where the bridge runs (its own time zone)."""
    now = datetime.now().astimezone()
    return now.strftime("%A %d %B %Y, %H:%M:%S ") + (now.tzname() or "local time")


@requires_approval
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email. Each call waits for a person to approve it.

    The demo's stand-in: nothing is sent anywhere, it only says what it would have sent.

    Args:
        to: the recipient's address
        subject: a short subject line
        body: the message
    """
    return f'Sent to {to}: "{subject}"'


#: What ``agui-bridge demo`` hands ``create_app(config, tools=…)``.
DEMO_TOOLS = (get_time, send_email)
