-- The job record (mneme:job:{id}), written here only: by the accept step (sessions.lua), by the stages
-- (memory/state/jobs.py) and by child mode's sealing (sessions.lua 'seal'). A job holds its message
-- ('payload') and, once extracted, its stages' input ('work') until it is finished; then only its status.

-- A finished job: its status without the message or its extraction, rewritten so Redis can store it
-- compactly again (a hash that once held a long field stays in the big encoding), kept for `ttl`.
local function job_retire(job, ttl)
  local fields, keep = redis.call('HGETALL', job), {}
  for i = 1, #fields, 2 do
    local name = fields[i]
    if name ~= 'payload' and name ~= 'work' then keep[#keep + 1] = name; keep[#keep + 1] = fields[i + 1] end
  end
  redis.call('DEL', job)
  redis.call('HSET', job, unpack(keep))
  redis.call('EXPIRE', job, ttl)
end

-- A message accepted: its job, pending until done.
local function job_accept(job, pending, f)
  redis.call('HSET', job, 'state', 'accepted', 'accepted_at', f.now, 'who', f.who, 'payload', f.payload)
  redis.call('EXPIRE', job, f.job_ttl)
  redis.call('ZADD', pending, f.now, f.job_id)
end

-- Extraction's result, once (a redelivered extraction keeps the first), and in the same step the branches'
-- task messages pushed (`sends`: queue, message, queue, message…; again on a redelivery or a redrive, which
-- re-sends what the broker may have lost: the stages are idempotent). A job with no branch left is done.
local function job_extracted(job, pending, branches, events, now, job_id, done_ttl, work, sends)
  if redis.call('EXISTS', job) == 0 then return 0 end
  local ended = redis.call('HGET', job, 'state')
  if ended == 'dropped' or ended == 'retracted' or ended == 'done' then return 0 end  -- ended meanwhile
  redis.call('HSETNX', job, 'done:extract', now)
  if redis.call('HSETNX', job, 'branches', branches) == 1 then
    redis.call('HSET', job, 'events', events, 'state', 'extracted', 'updated_at', now, 'work', work)
  end
  for i = 1, #sends, 2 do redis.call('LPUSH', sends[i], sends[i + 1]) end
  if tonumber(redis.call('HGET', job, 'branches')) <= 0 then
    redis.call('HSET', job, 'state', 'done', 'finished_at', now)
    job_retire(job, done_ttl)
    redis.call('ZREM', pending, job_id)
  end
  return 1
end

-- One branch done, once however often it is redelivered; the last one finishes the job.
local function job_complete(job, pending, stage, now, job_id, done_ttl)
  if redis.call('EXISTS', job) == 0 then return -1 end
  if redis.call('HSETNX', job, 'done:' .. stage, now) == 0 then return -2 end
  local left = redis.call('HINCRBY', job, 'branches', -1)
  local state = redis.call('HGET', job, 'state')
  if left <= 0 and state ~= 'failed' and state ~= 'dropped' and state ~= 'retracted' then
    redis.call('HSET', job, 'state', 'done', 'finished_at', now)
    job_retire(job, done_ttl)
    redis.call('ZREM', pending, job_id)
  end
  return left
end

-- Facts about how the job went, on a job that still exists (an erased user's jobs stay gone).
local function job_update(job, fields)
  if redis.call('EXISTS', job) == 1 then redis.call('HSET', job, unpack(fields)) end
  return 1
end

-- Ended on purpose (consent off, user erased, message retracted): not re-sent, its text dropped.
local function job_finish(job, pending, state, note, now, done_ttl, job_id)
  if redis.call('EXISTS', job) == 1 and redis.call('HGET', job, 'state') ~= state then
    redis.call('HSET', job, 'state', state, 'note', note, 'finished_at', now)
    job_retire(job, done_ttl)
  end
  redis.call('ZREM', pending, job_id)
  return 1
end

-- Child mode for a queued job: its message sealed, if it is still the one that was read.
local function job_reseal(job, payload, sealed)
  if redis.call('HGET', job, 'payload') ~= payload then return 0 end
  redis.call('HSET', job, 'payload', sealed)
  return 1
end
