-- One API key's requests of the last window (mneme:ratelimit:<key_id>: a zset, request → when it came, in ms):
-- a request is let in only while fewer than `limit` were let in within the window before it, so no window,
-- wherever it starts, lets more than `limit` through (a fixed per-minute count lets up to twice as many
-- through around a minute's end). A request refused is not kept. Returns 0 when let in, else the ms until the
-- oldest request leaves the window and makes room.
local function rate_take(key, now_ms, window_ms, limit, request)
  now_ms, window_ms, limit = tonumber(now_ms), tonumber(window_ms), tonumber(limit)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms - window_ms)
  if redis.call('ZCARD', key) >= limit then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return math.max(1, tonumber(oldest[2]) + window_ms - now_ms)
  end
  redis.call('ZADD', key, now_ms, request)
  redis.call('PEXPIRE', key, window_ms)
  return 0
end
