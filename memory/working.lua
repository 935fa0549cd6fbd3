-- Working memory: every change to a session is one atomic step of this script.
-- KEYS: meta, msg, full, snap, ids, job, pending, user_sessions, metrics
-- ARGV[1] = op: 'append' | 'rollback' | 'read' | 'get'
--
-- A snapshot is the comma-joined list of message seqs, ordered by client timestamp.
-- Version 0 is the empty session. Only the newest `kept` versions are stored; a message record
-- is deleted once no stored snapshot refers to it.

local meta, msg, full, snap, ids, job, pending = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local user_sessions, metrics = KEYS[8], KEYS[9]
local op = ARGV[1]

local function split(s)
  local out = {}
  if s then for part in string.gmatch(s, '[^,]+') do out[#out + 1] = part end end
  return out
end

local function snapshot(version)
  if version == 0 then return {} end
  local s = redis.call('HGET', snap, version)
  if not s then return nil end
  return split(s)
end

local function expire_all(ttl)
  for _, key in ipairs({meta, msg, full, snap, ids}) do redis.call('EXPIRE', key, ttl) end
end

-- Store `seqs` as the new head version; drop the version that falls out of the kept range and
-- delete the records only it referred to.
local function commit(seqs, kept)
  local head = redis.call('HINCRBY', meta, 'head', 1)
  redis.call('HSET', snap, head, table.concat(seqs, ','))
  local old = head - kept
  if old >= 1 then
    local dropped = snapshot(old)
    redis.call('HDEL', snap, old)
    if dropped and #dropped > 0 then
      local live = {}
      for _, s in ipairs(redis.call('HVALS', snap)) do
        for _, seq in ipairs(split(s)) do live[seq] = true end
      end
      for _, seq in ipairs(dropped) do
        if not live[seq] then redis.call('HDEL', msg, seq); redis.call('HDEL', full, seq) end
      end
    end
  end
  return head
end

local function records(seqs)
  if #seqs == 0 then return {} end
  return redis.call('HMGET', msg, unpack(seqs))
end

if op == 'append' then
  -- ARGV: op, user, message_id, content_hash, record_json, ts, full_text, window, kept, ttl,
  --       job_json, job_ttl, now, job_id, session_id
  local user, message_id, chash, record = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
  local ts, full_text = tonumber(ARGV[6]), ARGV[7]
  local window, kept, ttl = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local job_json, job_ttl, now, job_id = ARGV[11], tonumber(ARGV[12]), tonumber(ARGV[13]), ARGV[14]

  local owner = redis.call('HGET', meta, 'user')
  if owner and owner ~= user then return {'owner', owner} end
  local seen = redis.call('HGET', ids, message_id)
  if seen then
    local sep = string.find(seen, '|', 1, true)
    local head = tonumber(redis.call('HGET', meta, 'head')) or 0
    return {'dup', head, string.sub(seen, sep + 1)}
  end

  redis.call('HSET', meta, 'user', user)
  local seq = tostring(redis.call('HINCRBY', meta, 'seq', 1))
  local head = tonumber(redis.call('HGET', meta, 'head')) or 0
  local seqs = snapshot(head) or {}

  -- insert by client timestamp (ties keep arrival order); usually one comparison from the end
  local pos = #seqs + 1
  while pos > 1 do
    local prev = cjson.decode(redis.call('HGET', msg, seqs[pos - 1]))
    if prev.client_ts <= ts then break end
    pos = pos - 1
  end
  table.insert(seqs, pos, seq)
  while #seqs > window do table.remove(seqs, 1) end
  local in_window = 0
  for _, s in ipairs(seqs) do if s == seq then in_window = 1 end end

  local version = head
  if in_window == 1 then
    local rec = cjson.decode(record)
    rec.seq = tonumber(seq)
    rec.version = head + 1
    redis.call('HSET', msg, seq, cjson.encode(rec))
    if full_text ~= '' then redis.call('HSET', full, seq, full_text) end
    version = commit(seqs, kept)
  end
  redis.call('HSET', ids, message_id, seq .. '|' .. chash)
  expire_all(ttl)
  -- product metrics: aggregates only (messages, sessions, users, returning users)
  redis.call('HINCRBY', metrics, 'messages', 1)
  if redis.call('SADD', user_sessions, ARGV[15]) == 1 then
    redis.call('HINCRBY', metrics, 'sessions', 1)
    local n = redis.call('SCARD', user_sessions)
    if n == 1 then redis.call('HINCRBY', metrics, 'users', 1) end
    if n == 2 then redis.call('HINCRBY', metrics, 'returning_users', 1) end
  end
  redis.call('EXPIRE', user_sessions, ttl)

  redis.call('HSET', job, 'state', 'accepted', 'accepted_at', now, 'payload', job_json)
  redis.call('EXPIRE', job, job_ttl)
  redis.call('ZADD', pending, now, job_id)
  return {'ok', version, in_window}
end

if op == 'rollback' then
  -- ARGV: op, target ('undo' | version), kept, ttl
  local head = tonumber(redis.call('HGET', meta, 'head'))
  if not head then return {'nosession'} end
  local target = ARGV[2] == 'undo' and head - 1 or tonumber(ARGV[2])
  if target < 0 or target > head then return {'range', head} end
  local seqs = snapshot(target)
  if not seqs then return {'gone', head} end
  local current = snapshot(head) or {}
  local version = commit(seqs, tonumber(ARGV[3]))
  expire_all(tonumber(ARGV[4]))
  local keep = {}
  for _, s in ipairs(seqs) do keep[s] = true end
  local removed = {}
  for _, s in ipairs(current) do if not keep[s] then removed[#removed + 1] = s end end
  return {'ok', version, target, records(removed), redis.call('HGET', meta, 'user') or ''}
end

if op == 'read' then
  -- ARGV: op, version ('' = head)
  local head = tonumber(redis.call('HGET', meta, 'head'))
  if not head then return {'nosession'} end
  local version = ARGV[2] == '' and head or tonumber(ARGV[2])
  if not version or version < 0 or version > head then return {'range', head} end
  local seqs = snapshot(version)
  if not seqs then return {'gone', head} end
  return {'ok', head, version, records(seqs), redis.call('HGET', meta, 'user') or ''}
end

if op == 'get' then
  -- ARGV: op, message_id
  local seen = redis.call('HGET', ids, ARGV[2])
  if not seen then return {'missing'} end
  local seq = string.sub(seen, 1, string.find(seen, '|', 1, true) - 1)
  local rec = redis.call('HGET', msg, seq)
  if not rec then return {'gone'} end
  return {'ok', rec, redis.call('HGET', full, seq) or '', redis.call('HGET', meta, 'user') or ''}
end

return redis.error_reply('unknown op ' .. tostring(op))
