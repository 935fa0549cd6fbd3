-- Consent per purpose, in a user's policy hash (mneme:user:<tenant>:<user>), one atomic step:
-- 'purpose:<name>' = n while the purpose's n-th grant stands, -n once it was withdrawn after it
-- (memory.purposes). A hash with no purpose field holds grant 1 of every purpose when the user consented before
-- purposes existed (long_term 1) or no consent is required: the first change writes that out.
-- KEYS[1] the hash. ARGV: at, by, long_term ('1' | '0' | '' to leave it), op ('set': grant exactly the purposes
-- named; 'grant': these too; 'withdraw': these no longer), required ('1' | '0'), how many purposes the deployment
-- has, those purposes, then the purposes the op names. Returns the purposes this step withdrew.
local key = KEYS[1]
local at, by, long_term, op, required = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local count = tonumber(ARGV[6])
local purposes, named = {}, {}
for i = 1, count do purposes[i] = ARGV[6 + i] end
for i = 7 + count, #ARGV do named[ARGV[i]] = true end

local grants, recorded = {}, false
local fields = redis.call('HGETALL', key)
for i = 1, #fields, 2 do
  local purpose = string.match(fields[i], '^purpose:(.+)$')
  if purpose then
    grants[purpose] = tonumber(fields[i + 1])
    recorded = true
  end
end
if not recorded and (redis.call('HGET', key, 'long_term') == '1' or required == '0') then
  for _, purpose in ipairs(purposes) do grants[purpose] = 1 end
end

local withdrawn = {}
for _, purpose in ipairs(purposes) do
  local n = grants[purpose] or 0
  local want
  if op == 'set' then
    want = named[purpose] == true
  elseif op == 'grant' then
    want = n > 0 or named[purpose] == true
  else
    want = n > 0 and not named[purpose]
  end
  if want and n <= 0 then
    n = 1 - n
  elseif not want and n > 0 then
    n = -n
    table.insert(withdrawn, purpose)
  end
  if n ~= 0 then redis.call('HSET', key, 'purpose:' .. purpose, n) end
end
if long_term ~= '' then redis.call('HSET', key, 'long_term', long_term) end
redis.call('HSET', key, 'consent_at', at, 'consent_by', by)
return withdrawn
