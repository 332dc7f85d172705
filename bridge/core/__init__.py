"""The pure translation core: upstream chunks → parts → filters → AG-UI events. No I/O.

``decode`` (Chat Completions) and ``decode_responses`` read upstream objects into ``parts``;
``reasoning_tags`` (with ``markers``) and ``text_tools`` are the streaming filters; ``emitter``
turns parts into AG-UI events; ``translate`` drives them for one turn; ``encode`` writes frames;
``errors`` and ``usage`` are shared. Nothing here imports httpx, Starlette, uvicorn or anyio
(an import-linter contract in ``make test`` holds it so).
"""
