-- Product metrics of a shard (mneme:metrics:{<shard>}:<tenant>): aggregates only — messages and sessions.
-- Returns 1 when the message starts a session of the user (who then counts as a user, or a returning one:
-- ``memory.state.counters``, outside this step, since a user's sessions span shards).
local function count_message(metrics, user_sessions, session_id, ttl)
  redis.call('HINCRBY', metrics, 'messages', 1)
  local new = redis.call('SADD', user_sessions, session_id)
  if new == 1 then redis.call('HINCRBY', metrics, 'sessions', 1) end
  redis.call('EXPIRE', user_sessions, ttl)
  return new
end
