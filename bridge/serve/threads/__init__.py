"""Threads that survive a reload (README "Threads"): with ``--threads`` the bridge keeps each
owner's conversations and each run's events, so a client that reloads finds its thread again
(a hydrate) and a run goes on when its connection drops, for the client to follow again."""
