-- CompareAndDelete: if KEYS[1] holds exactly ARGV[1], delete it and
-- return 1; otherwise return 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
return redis.call('DEL', KEYS[1])
