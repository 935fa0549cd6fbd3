-- A tenant's place in the pipeline (memory/state/fairness.py): `flight` (zset: job id → when it was let in),
-- `wait` (zset: job id → its place in the tenant's line) and `rids` (hash: waiting job id → the id of the
-- HTTP request that caused it; field '#seq' numbers the line). A tenant has at most `window` jobs in flight;
-- the rest wait in the order they came and are let in as the ones in flight end.

-- Let waiting jobs in while the tenant has room: {job id, request id, ...} in the order they came.
local function fair_let_in(flight, wait, rids, window, now)
  local out = {}
  local room = tonumber(window) - redis.call('ZCARD', flight)
  if room <= 0 then return out end
  local next = redis.call('ZRANGE', wait, 0, room - 1)
  if #next == 0 then return out end
  for _, job in ipairs(next) do
    redis.call('ZADD', flight, now, job)
    out[#out + 1] = job
    out[#out + 1] = redis.call('HGET', rids, job) or ''
  end
  redis.call('ZREM', wait, unpack(next))
  redis.call('HDEL', rids, unpack(next))
  return out
end

-- What a step answers: the jobs let in, how many still wait, and when the oldest job in flight was let in
-- (a long-stuck one may have ended unseen: fairness.py looks).
local function fair_state(flight, wait, let_in)
  local oldest = redis.call('ZRANGE', flight, 0, 0, 'WITHSCORES')
  return {let_in, redis.call('ZCARD', wait), oldest[2] or ''}
end

-- New jobs join the end of the tenant's line (one already in line or in flight keeps its place).
local function fair_admit(flight, wait, rids, window, now, jobs)
  for i = 1, #jobs, 2 do
    local job, rid = jobs[i], jobs[i + 1]
    if not redis.call('ZSCORE', flight, job) and not redis.call('ZSCORE', wait, job) then
      redis.call('ZADD', wait, redis.call('HINCRBY', rids, '#seq', 1), job)
      if rid ~= '' then redis.call('HSET', rids, job, rid) end
    end
  end
  return fair_state(flight, wait, fair_let_in(flight, wait, rids, window, now))
end

-- Jobs that ended (or that will never run: an erased user's) leave the tenant's flight and line.
local function fair_ended(flight, wait, rids, window, now, jobs)
  if #jobs > 0 then
    redis.call('ZREM', flight, unpack(jobs))
    redis.call('ZREM', wait, unpack(jobs))
    redis.call('HDEL', rids, unpack(jobs))
  end
  return fair_state(flight, wait, fair_let_in(flight, wait, rids, window, now))
end
