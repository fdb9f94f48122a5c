-- CompareAndSwap: if KEYS[1] holds exactly ARGV[1], replace it with
-- ARGV[2] for ARGV[3] milliseconds and return 1; otherwise return 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
