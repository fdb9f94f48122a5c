-- SetNX: store ARGV[1] under KEYS[1] for ARGV[2] milliseconds if the key
-- is absent. Returns 1 when it stored the value; otherwise the existing
-- value and its PTTL, read in the same atomic step: {value, pttl}.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
