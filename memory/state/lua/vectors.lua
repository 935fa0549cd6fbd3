-- The vector of a session's newest embedded turn, kept in the session's `vec` hash (seq → the vector as the
-- embed stage writes it) for the next turn's context (``WorkingMemory.keep_vectors``); sessions.lua drops it
-- with any step that takes a message back, with child mode and with the session. A script of its own: it
-- runs once a session a batch, and a step of sessions.lua costs ~4 µs more than the same step on its own.
-- KEYS: meta, ids, vec (the session's). ARGV: ttl, message id, vector.
-- Kept unless `vec` holds a later turn's, the message was taken back (or never taken), or the session is a
-- child's (child mode came while it was being embedded). Replies 1 if kept, else 0.
local meta, ids, vec = KEYS[1], KEYS[2], KEYS[3]
local seen = redis.call('HGET', ids, ARGV[2])
if not seen or string.sub(seen, -2) == '|r' or redis.call('HGET', meta, 'child') == '1' then return 0 end
local seq = tonumber(string.sub(seen, 1, string.find(seen, '|', 1, true) - 1))
local held = redis.call('HKEYS', vec)[1]
if held and tonumber(held) > seq then return 0 end
redis.call('DEL', vec)
redis.call('HSET', vec, seq, ARGV[3])
redis.call('EXPIRE', vec, tonumber(ARGV[1]))
return 1
