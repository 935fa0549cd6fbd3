-- Dead letters (memory/state/deadletters.py): the list, newest first, and its companion hash task id → entry,
-- changed together in one step.

-- Keep `entry` once per task id; past `cap` entries the oldest fall off the list and the hash together.
local function letter_push(list, by_id, task_id, entry, cap)
  if redis.call('HSETNX', by_id, task_id, entry) == 0 then return 0 end
  redis.call('LPUSH', list, entry)
  while redis.call('LLEN', list) > tonumber(cap) do
    local oldest = redis.call('RPOP', list)
    local ok, decoded = pcall(cjson.decode, oldest)
    if ok and type(decoded) == 'table' and decoded['id'] then redis.call('HDEL', by_id, decoded['id']) end
  end
  return 1
end

local function letter_remove(list, by_id, task_id)
  local entry = redis.call('HGET', by_id, task_id)
  if not entry then return 0 end
  redis.call('LREM', list, 1, entry)
  redis.call('HDEL', by_id, task_id)
  return 1
end
