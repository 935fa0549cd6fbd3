-- Working memory: every change to a session is one atomic step of this script. It runs after jobs.lua
-- and counters.lua (``memory.lua.script``), whose functions it calls: the accept step ('append') is one
-- step made of named parts — admit (owner, duplicate, retracted), intake (the window), count_message
-- (counters.lua) and job_accept (jobs.lua). Every key is in the session's shard (one hash tag: one slot of a
-- cluster); the caller pushes the tasks a step decides onto the broker after it (``memory.state.dispatch``).
-- KEYS: meta, msg, full, snap, ids, vec, job, pending, user_sessions, metrics, retracting[, job keys ('seal')]
-- ARGV[1] = op: 'append' | 'rollback' | 'drop' | 'read' | 'before' | 'get' | 'held' | 'seal' | 'child'
--
-- Whether the session's user is a child is kept in meta ('child': '1' or '0'), so the accept step need not
-- read the user's policy (another slot): set from the policy its caller read when the session starts, and
-- by child mode ('child', then 'seal') on every session of the user when it changes.
--
-- A snapshot is the list of message seqs ordered by client timestamp, comma-joined, with a run of
-- consecutive seqs written as 'first-last' ("1-50,52").
-- Version 0 is the empty session. Only the newest `kept` versions are stored; a message record
-- is deleted once no stored snapshot refers to it.
--
-- A message record is JSON with short keys and the client timestamp first, so ordering reads it with
-- one pattern match instead of decoding it:
--   {"t":client_ts,"s":seq,"v":version,"a":received_at,"m":message_id,"r":role,"c":content[,"d":device][,"x":true]}
-- The session id is not stored (it is the key's).
--
-- `ids` maps a client message_id to "seq|content hash", with "|r" after it once a rollback took the
-- message back (retracted): its long-term effects are removed, and the id is not accepted again.
--
-- `vec` holds the vector the newest turn embedded so far was embedded to (vectors.lua), so the next turn's
-- vector adds a share of it without embedding that turn again (on another embed worker too). Any step that
-- takes a message back, and child mode, drop it.

local meta, msg, full, snap, ids, vec = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local job, pending, user_sessions, metrics, retracting = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local op = ARGV[1]

-- A snapshot is handled as spans: {first, last} runs of consecutive seqs, in snapshot order.
local function parse(s)
  local first, last = string.match(s, '^(%d+)%-(%d+)$')
  if first then return {{tonumber(first), tonumber(last)}} end
  local out = {}
  for part in string.gmatch(s, '[^,]+') do
    first, last = string.match(part, '^(%d+)%-(%d+)$')
    if first then
      out[#out + 1] = {tonumber(first), tonumber(last)}
    else
      local n = tonumber(part)
      out[#out + 1] = {n, n}
    end
  end
  return out
end

local function format(spans)
  local parts = {}
  for i, span in ipairs(spans) do
    parts[i] = span[1] == span[2] and string.format('%d', span[1]) or string.format('%d-%d', span[1], span[2])
  end
  return table.concat(parts, ',')
end

local function expand(spans)
  local out = {}
  for _, span in ipairs(spans) do
    for n = span[1], span[2] do out[#out + 1] = n end
  end
  return out
end

local function runs(seqs)
  local out = {}
  for _, n in ipairs(seqs) do
    local last = out[#out]
    if last and n == last[2] + 1 then last[2] = n else out[#out + 1] = {n, n} end
  end
  return out
end

-- the parts of [lo, hi] that none of `spans` covers, appended to `out` as spans
local function uncovered(lo, hi, spans, out)
  local n = lo
  while n <= hi do
    local reach, next_start = nil, nil
    for _, span in ipairs(spans) do
      if span[1] <= n then
        if span[2] >= n and (not reach or span[2] > reach) then reach = span[2] end
      elseif not next_start or span[1] < next_start then
        next_start = span[1]
      end
    end
    if reach then
      n = reach + 1
    else
      local stop = next_start and math.min(hi, next_start - 1) or hi
      out[#out + 1] = {n, stop}
      n = stop + 1
    end
  end
  return out
end

local function snapshot(version)
  if version == 0 then return {} end
  local s = redis.call('HGET', snap, version)
  if not s then return nil end
  return parse(s)
end

local function client_ts(record)
  return tonumber(string.match(record, '^{"t":([^,}]+)'))
end

local function expire_all(ttl)
  for _, key in ipairs({meta, msg, full, snap, ids}) do redis.call('EXPIRE', key, ttl) end
end

-- Store `spans` as version head + 1; drop the version that falls out of the kept range and delete
-- the records only it referred to. Returns the new version and whether the kept snapshots are now
-- "monotone" (each one span, first and last seq never decreasing from one version to the next), which
-- the caller records in meta. While they are, the records the dropped version alone referred to are
-- those below the first seq of the next version, so the other snapshots need not be read.
local function commit(spans, kept, head, previous, mono)
  local version = head + 1
  redis.call('HSET', snap, version, format(spans))
  local single = #spans == 1
  if head == 0 then
    mono = single
  elseif mono then
    mono = single and #previous == 1 and spans[1][1] >= previous[1][1] and spans[1][2] >= previous[1][2]
  end
  local old = version - kept
  if old < 1 then return version, mono end
  local dropped = redis.call('HGET', snap, old)
  redis.call('HDEL', snap, old)
  if not dropped or dropped == '' then return version, mono end
  local dead = {}
  if mono then
    local d, next_spans = parse(dropped)[1], parse(redis.call('HGET', snap, old + 1))
    uncovered(d[1], math.min(d[2], next_spans[1][1] - 1), {}, dead)
  else
    local doomed = {}
    for _, span in ipairs(parse(dropped)) do uncovered(span[1], span[2], spans, doomed) end
    if #doomed > 0 then  -- only these can be unreferenced now: look them up in the kept snapshots
      local all, versions, live = redis.call('HGETALL', snap), {}, {}
      local by_version = {}
      for i = 1, #all, 2 do
        local v, parsed = tonumber(all[i]), parse(all[i + 1])
        versions[#versions + 1] = v
        by_version[v] = parsed
        for _, span in ipairs(parsed) do live[#live + 1] = span end
      end
      for _, span in ipairs(doomed) do uncovered(span[1], span[2], live, dead) end
      table.sort(versions)
      mono = true
      local prev = nil
      for _, v in ipairs(versions) do
        local cur = by_version[v]
        if #cur ~= 1 or (prev and (cur[1][1] < prev[1] or cur[1][2] < prev[2])) then mono = false; break end
        prev = cur[1]
      end
    end
  end
  dead = expand(dead)
  if #dead > 0 then
    redis.call('HDEL', msg, unpack(dead))
    redis.call('HDEL', full, unpack(dead))
  end
  return version, mono
end

local function records(spans)
  local seqs = expand(spans)
  if #seqs == 0 then return {} end
  return redis.call('HMGET', msg, unpack(seqs))
end

-- Who may append, and whether this message id was seen: a reply that ends the step, or nil.
local function admit(f)
  local state = redis.call('HMGET', meta, 'user', 'head')
  local owner, head = state[1], tonumber(state[2]) or 0
  if owner and owner ~= f.user then return {'owner', owner} end
  local seen = redis.call('HGET', ids, f.message_id)
  if seen then
    if string.sub(seen, -2) == '|r' then return {'retracted'} end  -- taken back by a rollback
    local sep = string.find(seen, '|', 1, true)
    return {'dup', head, string.sub(seen, sep + 1)}
  end
  return nil
end

-- The message into the window: its record, inserted by client timestamp (ties keep arrival order; usually
-- one comparison from the end), the oldest beyond `window` dropped, a new version committed. Returns the
-- new head version, whether the message is in the window, and the head's spans before the step.
local function intake(f)
  local state = redis.call('HMGET', meta, 'head', 'seq', 'mono')
  local head = tonumber(state[1]) or 0
  local ts = tonumber(f.ts)
  local seq = (tonumber(state[2]) or 0) + 1
  local spans = snapshot(head) or {}
  local previous = {}
  for i, span in ipairs(spans) do previous[i] = {span[1], span[2]} end
  local count = 0
  for _, span in ipairs(spans) do count = count + span[2] - span[1] + 1 end
  local last = spans[#spans]

  local in_window = 1
  if not last or client_ts(redis.call('HGET', msg, last[2])) <= ts then
    if last and seq == last[2] + 1 then last[2] = seq else spans[#spans + 1] = {seq, seq} end
    count = count + 1
    while count > f.window do
      local first = spans[1]
      if first[1] == first[2] then table.remove(spans, 1) else first[1] = first[1] + 1 end
      count = count - 1
    end
  else
    local seqs = expand(spans)
    local pos = #seqs
    while pos > 1 do
      if client_ts(redis.call('HGET', msg, seqs[pos - 1])) <= ts then break end
      pos = pos - 1
    end
    table.insert(seqs, pos, seq)
    while #seqs > f.window do table.remove(seqs, 1) end
    in_window = 0
    for _, n in ipairs(seqs) do if n == seq then in_window = 1 end end
    spans = runs(seqs)
  end

  local version, mono = head, state[3] == '1'
  if in_window == 1 then
    redis.call('HSET', msg, seq, '{"t":' .. f.ts .. ',"s":' .. seq .. ',"v":' .. (head + 1) .. ',' .. f.tail)
    if f.full_text ~= '' then redis.call('HSET', full, seq, f.full_text) end
    version, mono = commit(spans, f.kept, head, previous, mono)
  end
  redis.call('HSET', meta, 'user', f.user, 'seq', seq, 'head', version, 'mono', mono and 1 or 0, 'child', f.child)
  redis.call('HSET', ids, f.message_id, seq .. '|' .. f.digest)
  expire_all(f.ttl)
  return version, in_window, spans, head
end

if op == 'append' then
  -- ARGV: op, one JSON object of named fields: user, message_id, digest (of the content), ts (client
  -- timestamp, as text), tail (the record after its timestamp, seq and version), full_text ('' unless the
  -- reply was cut), window, kept, ttl (session), session_id, child ('1' or '0' as the caller's read of the
  -- user's policy, '' unread), check_child (the text is plaintext), read_back, and for the job: job_id, who,
  -- payload, job_ttl, now. Replies 'ok', version, in window, whether the session is new to the user[, window
  -- records, owner].
  local f = cjson.decode(ARGV[2])
  local child = redis.call('HGET', meta, 'child')
  if not child then  -- a session starting (or kept from before the flag): its user's flag comes from the caller
    if f.child == '' then return {'policy'} end
    child = f.child
  end
  -- a child's text must arrive sealed: say so, and the caller seals it and asks again
  if f.check_child and child == '1' then return {'child'} end
  local refused = admit(f)
  if refused then return refused end
  f.child = child
  local version, in_window, spans, head = intake(f)
  local new = count_message(metrics, user_sessions, f.session_id, f.ttl)
  job_accept(job, pending, f)
  if f.read_back then  -- the window at the new head comes back in the same step
    if in_window == 0 then spans = snapshot(head) or {} end
    return {'ok', version, in_window, new, records(spans), f.user}
  end
  return {'ok', version, in_window, new}
end

if op == 'child' then
  -- ARGV: op, user, '1' or '0'. The user's flag on a session of theirs that exists ('nosession' otherwise).
  local owner = redis.call('HGET', meta, 'user')
  if not owner then return {'nosession'} end
  if owner ~= ARGV[2] then return {'owner'} end
  redis.call('HSET', meta, 'child', ARGV[3])
  redis.call('DEL', vec)  -- a child's text is never embedded: nothing of it is kept from before
  return {'ok'}
end

if op == 'rollback' then
  -- ARGV: op, target ('undo' | 'id:<message_id>' | version), kept, ttl, tenant, session_id
  -- 'undo' takes the most recently appended message still in the window (the highest seq) out of the
  -- head's snapshot; 'id:<message_id>' takes that one message back, wherever it is (out of the window into a
  -- new version if the window holds it; one that has left the window is taken back all the same); a version
  -- restores that kept snapshot. Each message taken back is marked retracted in `ids` ("seq|hash|r") and, in
  -- this same step, the retraction is recorded in the shard's `retracting` set
  -- ("tenant\x1fuser\x1fsession\x1fid,id…" → when), until memory.retract, which the caller queues, has removed
  -- what long-term memory made of them (the redrive re-sends one left there). Replies 'ok', version, target,
  -- the records taken out of the window, owner, retraction; 'missing' for an id the session never took.
  local head = tonumber(redis.call('HGET', meta, 'head'))
  if not head then return {'nosession'} end
  redis.call('DEL', vec)  -- it may be of a message this takes back
  local previous = snapshot(head) or {}
  local current = expand(previous)
  local spans, target
  local named = string.match(ARGV[2], '^id:(.+)$')
  if named then
    local seen = redis.call('HGET', ids, named)
    if not seen then return {'missing', head} end
    local user = redis.call('HGET', meta, 'user') or ''
    if string.sub(seen, -2) == '|r' then return {'ok', head, -1, {}, user, ''} end  -- taken back before
    local seq = tonumber(string.match(seen, '^(%d+)|'))
    local rest, held = {}, false
    for _, n in ipairs(current) do
      if n == seq then held = true else rest[#rest + 1] = n end
    end
    local gone, version = {}, head
    if held then
      gone = redis.call('HMGET', msg, seq)
      local mono
      version, mono = commit(runs(rest), tonumber(ARGV[3]), head, previous, redis.call('HGET', meta, 'mono') == '1')
      redis.call('HSET', meta, 'head', version, 'mono', mono and 1 or 0)
    end
    redis.call('HSET', ids, named, seen .. '|r')
    expire_all(tonumber(ARGV[4]))
    local retraction = table.concat({ARGV[5], user, ARGV[6], named}, '\031')
    redis.call('ZADD', retracting, redis.call('TIME')[1], retraction)
    return {'ok', version, -1, gone, user, retraction}
  end
  if ARGV[2] == 'undo' then
    if #current == 0 then return {'empty', head} end
    local top = 0
    for _, n in ipairs(current) do if n > top then top = n end end
    local rest = {}
    for _, n in ipairs(current) do if n ~= top then rest[#rest + 1] = n end end
    spans, target = runs(rest), -1
  else
    target = tonumber(ARGV[2])
    if target < 0 or target > head then return {'range', head} end
    spans = snapshot(target)
    if not spans then return {'gone', head} end
  end
  local keep = {}
  for _, n in ipairs(expand(spans)) do keep[n] = true end
  local removed = {}
  for _, n in ipairs(current) do if not keep[n] then removed[#removed + 1] = n end end
  local gone = #removed > 0 and redis.call('HMGET', msg, unpack(removed)) or {}  -- before commit drops any
  local version, mono = commit(spans, tonumber(ARGV[3]), head, previous, redis.call('HGET', meta, 'mono') == '1')
  redis.call('HSET', meta, 'head', version, 'mono', mono and 1 or 0)
  local retracted = {}
  for _, record in ipairs(gone) do
    local message_id = cjson.decode(record).m
    local seen = redis.call('HGET', ids, message_id)
    if seen and string.sub(seen, -2) ~= '|r' then redis.call('HSET', ids, message_id, seen .. '|r') end
    retracted[#retracted + 1] = message_id
  end
  expire_all(tonumber(ARGV[4]))
  local user = redis.call('HGET', meta, 'user') or ''
  local retraction = ''
  if #retracted > 0 then  -- ids match the id pattern: none holds a ',' or a \x1f
    retraction = table.concat({ARGV[5], user, ARGV[6], table.concat(retracted, ',')}, '\031')
    redis.call('ZADD', retracting, redis.call('TIME')[1], retraction)
  end
  return {'ok', version, target, gone, user, retraction}
end

if op == 'drop' then
  -- ARGV: op, ttl, tenant, session_id. Delete the session's content: every message id it ever took is
  -- marked retracted in `ids` (kept until the TTL: the id is not accepted again, and work still queued for
  -- it is dropped, as after an undo), its records, full texts and kept snapshots go, and its head is a new
  -- version with an empty window. The retraction of all its messages is recorded in this same step, as a
  -- rollback's is. Replies 'ok', version, owner, retraction ('' if it never took a message).
  local head = tonumber(redis.call('HGET', meta, 'head'))
  if not head then return {'nosession'} end
  local taken = redis.call('HGETALL', ids)
  local retracted = {}
  for i = 1, #taken, 2 do
    if string.sub(taken[i + 1], -2) ~= '|r' then redis.call('HSET', ids, taken[i], taken[i + 1] .. '|r') end
    retracted[#retracted + 1] = taken[i]
  end
  redis.call('DEL', msg, full, snap, vec)
  local version = head + 1
  redis.call('HSET', snap, version, '')
  redis.call('HSET', meta, 'head', version, 'mono', 1)
  expire_all(tonumber(ARGV[2]))
  local user = redis.call('HGET', meta, 'user') or ''
  local retraction = ''
  if #retracted > 0 then
    retraction = table.concat({ARGV[3], user, ARGV[4], table.concat(retracted, ',')}, '\031')
    redis.call('ZADD', retracting, redis.call('TIME')[1], retraction)
  end
  return {'ok', version, user, retraction}
end

if op == 'read' then
  -- ARGV: op, version ('' = head)
  local head = tonumber(redis.call('HGET', meta, 'head'))
  if not head then return {'nosession'} end
  local version = ARGV[2] == '' and head or tonumber(ARGV[2])
  if not version or version < 0 or version > head then return {'range', head} end
  local spans = snapshot(version)
  if not spans then return {'gone', head} end
  return {'ok', head, version, records(spans), redis.call('HGET', meta, 'user') or ''}
end

if op == 'before' then
  -- ARGV: op, message ids. For each, the record of the message just before it in the head snapshot ('' if
  -- it is the first, not in the window, or unknown): the turn a reply answers, without the whole window.
  local head = tonumber(redis.call('HGET', meta, 'head'))
  if not head then return {'nosession'} end
  local seqs = expand(snapshot(head) or {})
  local at = {}
  for i, seq in ipairs(seqs) do at[seq] = i end
  local out = {'ok', redis.call('HGET', meta, 'user') or ''}
  for n = 2, #ARGV do
    local seen = redis.call('HGET', ids, ARGV[n])
    local i = seen and at[tonumber(string.sub(seen, 1, string.find(seen, '|', 1, true) - 1))]
    out[#out + 1] = (i and i > 1) and (redis.call('HGET', msg, seqs[i - 1]) or '') or ''
  end
  return out
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

if op == 'held' then
  -- ARGV: op. Everything of the session that holds text, read in one step (child mode, with 'seal').
  local owner = redis.call('HGET', meta, 'user')
  if not owner then return {'nosession'} end
  return {'ok', owner, redis.call('HGETALL', msg), redis.call('HGETALL', full), redis.call('HGETALL', ids)}
end

if op == 'seal' then
  -- ARGV: op, user, n, n x (seq, record, sealed record), m, m x (seq, full text, sealed full text), d, d x
  -- (message id, seq|digest, seq|keyed digest), then for each job key after the first 11 KEYS: (payload, sealed
  -- payload). A value is replaced only while it is still the one 'held' read: records are never rewritten, only
  -- deleted once no kept snapshot needs them (and then stay gone), and what was appended since is not touched,
  -- so nothing appended or rolled back meanwhile is lost.
  if redis.call('HGET', meta, 'user') ~= ARGV[2] then return {'owner'} end
  local sealed, i = {0, 0, 0, 0}, 3
  for part, hash in ipairs({msg, full, ids}) do
    local n = tonumber(ARGV[i])
    i = i + 1
    for _ = 1, n do
      if redis.call('HGET', hash, ARGV[i]) == ARGV[i + 1] then
        redis.call('HSET', hash, ARGV[i], ARGV[i + 2])
        sealed[part] = sealed[part] + 1
      end
      i = i + 3
    end
  end
  for k = 12, #KEYS do
    sealed[4] = sealed[4] + job_reseal(KEYS[k], ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  return {'ok', sealed[1], sealed[2], sealed[4]}
end

return redis.error_reply('unknown op ' .. tostring(op))
