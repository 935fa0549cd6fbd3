-- Product metrics (mneme:metrics:{tenant}): aggregates only — messages, sessions, users, returning users.
local function count_message(metrics, user_sessions, session_id, ttl)
  redis.call('HINCRBY', metrics, 'messages', 1)
  if redis.call('SADD', user_sessions, session_id) == 1 then
    redis.call('HINCRBY', metrics, 'sessions', 1)
    local n = redis.call('SCARD', user_sessions)
    if n == 1 then redis.call('HINCRBY', metrics, 'users', 1) end
    if n == 2 then redis.call('HINCRBY', metrics, 'returning_users', 1) end
  end
  redis.call('EXPIRE', user_sessions, ttl)
end
