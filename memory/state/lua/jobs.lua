-- The job record (mneme:job:{<shard>}:<id>), written here only: by the accept step (sessions.lua), by the stages
-- (memory/state/jobs.py) and by child mode's sealing (sessions.lua 'seal'). A job holds its message
-- ('payload') and, once extracted, its stages' input ('work') until it is finished. Then its record goes and
-- only its status stays, as one line in a bucket of finished jobs (`done`: a hash of job id → status shared
-- by the jobs that finished in the same slice of the done TTL, which expires as a whole): one line costs a
-- small fraction of a key of its own. The line's fields, '|'-separated (ids never hold a '|'; free text
-- has it replaced), as `memory/state/jobs.py` reads them: state, tenant, user id, session id, message id,
-- accepted_at, then in ms after accepted_at: finished, extract, embed, graph; then the event ids
-- (','-separated), embed_batch, merged, llm, error, note.

local function job_free(text) return (string.gsub(text or '', '|', '/')) end

local function job_fields(line)
  local fields = {}
  for value in (line .. '|'):gmatch('([^|]*)|') do fields[#fields + 1] = value end
  return fields
end

local function job_after(at, t)
  if not t then return '' end
  return string.format('%d', math.floor((tonumber(t) - tonumber(at)) * 1000 + 0.5))
end

-- A finished job: its status line into `done` (kept until `done_until`, a unix time), its record gone.
local function job_retire(job, done, done_until, job_id)
  local raw, f = redis.call('HGETALL', job), {}
  for i = 1, #raw, 2 do f[raw[i]] = raw[i + 1] end
  -- (the accept step writes both; a record planted without them still retires)
  local who, at = f.who and cjson.decode(f.who) or {'', '', '', ''}, f.accepted_at or '0'
  local events = f.events and table.concat(cjson.decode(f.events), ',') or ''
  local line = table.concat({f.state, who[1], who[2], who[3], who[4], at, job_after(at, f.finished_at),
                             job_after(at, f['done:extract']), job_after(at, f['done:embed']),
                             job_after(at, f['done:graph']), events, f.embed_batch or '', f.merged or '',
                             job_free(f.llm), job_free(f.error), job_free(f.note)}, '|')
  redis.call('HSET', done, job_id, line)
  redis.call('EXPIREAT', done, done_until)
  redis.call('DEL', job)
end

-- A finished job ended again in another state (its message retracted after it was done): its status
-- line says so, in whichever of the `buckets` holds it.
local function job_refinish(buckets, job_id, state, note, now)
  for _, bucket in ipairs(buckets) do
    local line = redis.call('HGET', bucket, job_id)
    if line then
      local f = job_fields(line)
      if f[1] ~= state then
        f[1], f[7], f[16] = state, job_after(f[6], now), job_free(note)
        redis.call('HSET', bucket, job_id, table.concat(f, '|'))
      end
      return
    end
  end
end

-- A message accepted: its job, pending until done.
local function job_accept(job, pending, f)
  redis.call('HSET', job, 'state', 'accepted', 'accepted_at', f.now, 'who', f.who, 'payload', f.payload)
  redis.call('EXPIRE', job, f.job_ttl)
  redis.call('ZADD', pending, f.now, f.job_id)
end

-- Extraction's result, once (a redelivered extraction keeps the first). Returns 1 while the job is declared
-- and not ended: its caller then pushes the branches' tasks (again on a redelivery or a redrive, which
-- re-sends what the broker may have lost: the stages are idempotent). A job with no branch left is done.
local function job_extracted(job, pending, done, branches, events, now, job_id, done_until, work)
  if redis.call('EXISTS', job) == 0 then return 0 end
  local ended = redis.call('HGET', job, 'state')
  if ended == 'dropped' or ended == 'retracted' or ended == 'done' then return 0 end  -- ended meanwhile
  redis.call('HSETNX', job, 'done:extract', now)
  if redis.call('HSETNX', job, 'branches', branches) == 1 then
    redis.call('HSET', job, 'events', events, 'state', 'extracted', 'updated_at', now, 'work', work)
  end
  if tonumber(redis.call('HGET', job, 'branches')) <= 0 then
    redis.call('HSET', job, 'state', 'done', 'finished_at', now)
    job_retire(job, done, done_until, job_id)
    redis.call('ZREM', pending, job_id)
  end
  return 1
end

-- One branch done, once however often it is redelivered; the last one finishes the job.
local function job_complete(job, pending, done, stage, now, job_id, done_until)
  if redis.call('EXISTS', job) == 0 then return -1 end
  if redis.call('HSETNX', job, 'done:' .. stage, now) == 0 then return -2 end
  local left = redis.call('HINCRBY', job, 'branches', -1)
  local state = redis.call('HGET', job, 'state')
  if left <= 0 and state ~= 'failed' and state ~= 'dropped' and state ~= 'retracted' then
    redis.call('HSET', job, 'state', 'done', 'finished_at', now)
    job_retire(job, done, done_until, job_id)
    redis.call('ZREM', pending, job_id)
  end
  return left
end

-- Facts about how the job went, on a job that still exists (an erased user's jobs stay gone).
local function job_update(job, fields)
  if redis.call('EXISTS', job) == 1 then redis.call('HSET', job, unpack(fields)) end
  return 1
end

-- Ended on purpose (consent off, user erased, message retracted): not re-sent, its text dropped. A job
-- already finished is looked for in `buckets` (the first of them is where one finishing now goes).
local function job_finish(job, pending, buckets, state, note, now, done_until, job_id)
  if redis.call('EXISTS', job) == 0 then
    job_refinish(buckets, job_id, state, note, now)
  elseif redis.call('HGET', job, 'state') ~= state then
    redis.call('HSET', job, 'state', state, 'note', note, 'finished_at', now)
    job_retire(job, buckets[1], done_until, job_id)
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
