package memstore

import "time"

// runJanitor removes expired entries every interval until Close.
func (s *Store) runJanitor(interval time.Duration) {
	defer s.janitor.Done()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-ticker.C:
			s.sweep()
		}
	}
}

// sweep removes expired entries from every shard, one shard at a time,
// giving up early when the Store is closing.
func (s *Store) sweep() {
	for i := range s.shards {
		select {
		case <-s.stop:
			return
		default:
		}
		sh := &s.shards[i]
		sh.sweep(sh.keys(), s.now)
	}
}
