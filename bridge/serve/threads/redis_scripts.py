"""The Lua scripts of the Redis thread store (``redis_store``): each a write of several keys
made one command, so that no other write comes between its steps, and so that it costs the
client one command (redis-py costs this process more CPU per command than a token's whole way
through the bridge)."""

from __future__ import annotations

import re

#: A save (``KEYS``: the thread's document, the owner's list and summaries; ``ARGV``: the
#: document, its expiry in ms, the thread's name, the time of the save, its summary, the time
#: before which a save has expired, ``max_threads``, the prefix of the owner's documents' keys):
#: the document and its summary kept, then the owner's threads that went forgotten: expired
#: ones (their documents expired with them) and the least recently saved beyond the bound. One
#: script, so that no save in between is forgotten, so that an owner's summaries never outgrow
#: the threads kept, and so that a save costs the client one command: it costs this process
#: more CPU per command than a token's whole way through the bridge.
SAVE = """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[6])
for _, member in ipairs(redis.call('ZREVRANGE', KEYS[2], tonumber(ARGV[7]), -1)) do
  table.insert(gone, member)
end
for _, member in ipairs(gone) do
  redis.call('ZREM', KEYS[2], member)
  redis.call('HDEL', KEYS[3], member)
  redis.call('DEL', ARGV[8] .. member)
end
return #gone
"""

#: A run begins (``KEYS``: its events and its info; ``ARGV``: whose it is, as JSON, and how long
#: its keys are kept, in ms): what a run of the same id left is gone, and an entry of no frames
#: makes the stream, so that it exists to expire from now on. One command, as ``SAVE``.
BEGIN = """
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[2], 'whose', ARGV[1], 'ended', '0')
redis.call('XADD', KEYS[1], '0-1', 'first', '1', 'frames', '[]')
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

#: A run begins and its thread is saved as it begins (``BEGIN`` then ``SAVE``, their keys
#: and arguments one after the other): one command.
BEGIN_SAVE = BEGIN.replace("return 1\n", "") + re.sub(
    r"(KEYS|ARGV)\[(\d+)\]",
    lambda m: f"{m[1]}[{int(m[2]) + 2}]",
    SAVE,
)

#: A run's last batch (``KEYS``: its events and its info; ``ARGV``: the entry's id, its first
#: frame's number, its frames, how long the run is kept now, in ms): added, the run marked
#: ended, its keys kept ``RUN_KEPT``. One command, as ``SAVE``.
END = """
redis.call('XADD', KEYS[1], ARGV[1], 'first', ARGV[2], 'frames', ARGV[3], 'end', '1')
redis.call('HSET', KEYS[2], 'ended', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
"""
