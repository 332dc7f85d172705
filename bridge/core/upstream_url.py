"""What the bridge shows of an upstream URL, and the base URL an HTTP 404 suggests (no I/O).

A base URL may carry credentials (``http://user:password@host/v1``): what errors, the doctor and
recordings show of it never does. An upstream's 404 most often means a base URL without its
version segment (``http://127.0.0.1:8080`` for ``http://127.0.0.1:8080/v1``) or with an endpoint
pasted on its end (``…/v1/chat/completions``): ``upstream_url_hint`` says what was probably meant,
for ``serve``'s RUN_ERROR and the doctor alike.
"""

from __future__ import annotations

import base64
import re
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

#: A path segment that names an API version: ``v1``, ``v4`` (Zhipu), ``v1beta`` (Gemini's
#: ``/v1beta/openai``), ``v2alpha1``.
_VERSION = re.compile(r"v\d+(?:(?:alpha|beta)\d*)?", re.IGNORECASE)
#: Endpoints people paste on the end of a base URL, longest first.
_ENDPOINTS = (("chat", "completions"), ("completions",), ("responses",), ("models",))


def shown_url(url: str) -> str:
    """``url`` as the bridge shows it: without user name and password (``user:pass@``), query
    and fragment (where some services take a key)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


#: Query parameters whose values are credentials: ``?password=`` (which redis-py reads),
#: ``?key=``/``?api-key=`` (services that take the key in the URL), ``?token=``, a signature.
_CREDENTIAL = re.compile(r"pass|key|token|secret|sig|auth|credential", re.IGNORECASE)


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets a URL holds, for the redactor, in every spelling they can leave in: the
    password of ``user:password@`` and every query value whose name says it is a credential,
    each as written and decoded (``p%40ss`` is ``p@ss``), and the basic-auth token the user
    and password make (``Authorization: Basic …``, which a server may quote back)."""
    parts = urlsplit(url)
    found = [parts.password or ""]
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        if _CREDENTIAL.search(unquote_plus(name)):
            found.append(value)
    forms = [form for secret in found for form in (secret, unquote(secret), unquote_plus(secret))]
    if parts.password:  # as httpx sends it: user and password decoded
        pair_text = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
        forms.append(base64.b64encode(pair_text.encode()).decode("ascii"))
    return tuple(dict.fromkeys(form for form in forms if form))


def suggested_upstream_url(base_url: str) -> str | None:
    """The base URL a 404 from ``base_url`` suggests instead, or ``None``: an endpoint pasted on
    its end taken off, and ``/v1`` added when no path segment names a version (a base URL with
    one, such as Gemini's ``…/v1beta/openai``, is taken as meant)."""
    parts = urlsplit(base_url)
    segments = [segment for segment in parts.path.split("/") if segment]
    for endpoint in _ENDPOINTS:
        if tuple(segment.lower() for segment in segments[-len(endpoint) :]) == endpoint:
            del segments[-len(endpoint) :]
            break
    if not any(_VERSION.fullmatch(segment) for segment in segments):
        segments.append("v1")
    path = "/" + "/".join(segments)
    if path == "/" + "/".join(segment for segment in parts.path.split("/") if segment):
        return None
    return shown_url(urlunsplit((parts.scheme, parts.netloc, path, "", "")))


def upstream_url_hint(base_url: str) -> str | None:
    """``did you mean --upstream-url …?`` for a 404 from ``base_url``, or ``None``."""
    suggestion = suggested_upstream_url(base_url)
    return f"did you mean --upstream-url {suggestion}?" if suggestion else None
