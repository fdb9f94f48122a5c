-- Get: the value under KEYS[1] and its PTTL, {value, pttl}, or nil when
-- the key is absent.
local v = redis.call('GET', KEYS[1])
if not v then
  return false
end
return {v, redis.call('PTTL', KEYS[1])}
