"""The Lua scripts of the Redis thread store (``redis_store``): each a write of several keys
made one command, so that no other write comes between its steps, and so that it costs the
client one command (redis-py costs this process more CPU per command than a token's whole way
through the bridge)."""

from __future__ import annotations

import re

#: A save's work (``KEYS``: the thread's document, the owner's list and summaries; ``ARGV``: the
#: document, its expiry in ms, the thread's name, the time of the save, its summary, the time
#: before which a save has expired, ``max_threads``, the prefix of the owner's documents' keys):
#: the document and its summary kept, then the owner's threads that went forgotten: expired
#: ones (their documents expired with them) and the least recently saved beyond the bound. One
#: script, so that no save in between is forgotten, so that an owner's summaries never outgrow
#: the threads kept, and so that a save costs the client one command.
_SAVE_BODY = """
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
"""

#: A save (``_SAVE_BODY``'s keys and arguments, then ``KEYS[4]``: the thread's generation, and
#: ``ARGV[9]``: the generation the saving run began with, "" for any): nothing when the thread
#: was forgotten since the run began (-1), else the threads that went forgotten.
SAVE = (
    """
if ARGV[9] ~= '' and (redis.call('GET', KEYS[4]) or '0') ~= ARGV[9] then
  return -1
end
"""
    + _SAVE_BODY
    + "return #gone\n"
)

#: A run begins (``KEYS``: its events, its info, its thread's generation; ``ARGV``: whose it
#: is, as JSON, and how long its keys are kept, in ms): what a run of the same key left is
#: gone, and an entry of no frames makes the stream, so that it exists to expire from now on.
#: Answers the thread's generation, which outlives the run (a forget changes it: the run's
#: later save comes to nothing).
_BEGIN_BODY = """
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[2], 'whose', ARGV[1], 'ended', '0')
redis.call('XADD', KEYS[1], '0-1', 'first', '1', 'frames', '[]')
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local generation = redis.call('GET', KEYS[3])
if generation then
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
generation = generation or '0'
"""
BEGIN = _BEGIN_BODY + "return generation\n"

#: A run begins and its thread is saved as it begins (``BEGIN`` then the save's work, their
#: keys and arguments one after the other): one command, answering the generation.
BEGIN_SAVE = (
    _BEGIN_BODY
    + re.sub(
        r"(KEYS|ARGV)\[(\d+)\]", lambda m: f"{m[1]}[{int(m[2]) + 3 - (m[1] == 'ARGV')}]", _SAVE_BODY
    )
    + "return generation\n"
)

#: A thread forgotten (``KEYS``: its document, the owner's list and summaries, its generation;
#: ``ARGV``: the thread's name, how long the generation is kept, in ms): its summary (false
#: when it was not kept; "" when kept without one), and its generation changed, so that the
#: save of a run begun before comes to nothing (only for a thread kept: a flood of deletes of
#: made-up ids writes nothing).
FORGET = """
local summary = redis.call('HGET', KEYS[3], ARGV[1])
local deleted = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if deleted == 0 then
  return false
end
redis.call('INCR', KEYS[4])
redis.call('PEXPIRE', KEYS[4], ARGV[2])
return summary or ''
"""

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
