package policy

import (
	"sync"
	"sync/atomic"
	"time"
)

// journal remembers the keys a Tiered wrote to its fallback, with the local
// time each expires, until they are copied forward to the primary. It is
// bounded: when full it first drops expired keys (at most once a second),
// then refuses new ones. While it holds keys it sets flagJournal in flags.
type journal struct {
	mu        sync.Mutex
	keys      map[string]time.Time
	max       int
	flags     *atomic.Uint32
	nextPrune time.Time
}

func newJournal(max int, flags *atomic.Uint32) *journal {
	return &journal{keys: make(map[string]time.Time), max: max, flags: flags}
}

// add records key with its local deadline, or updates it. It reports false
// when the journal is full and key is not in it.
func (j *journal) add(key string, deadline time.Time) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.keys[key]; !ok && len(j.keys) >= j.max && !j.prune() {
		return false
	}
	j.keys[key] = deadline
	j.flags.Or(flagJournal)
	return true
}

// prune drops expired keys, at most once a second, and reports whether
// there is room afterwards. j.mu is held.
func (j *journal) prune() bool {
	now := time.Now()
	if now.Before(j.nextPrune) {
		return false
	}
	j.nextPrune = now.Add(time.Second)
	for k, d := range j.keys {
		if !d.After(now) {
			delete(j.keys, k)
		}
	}
	return len(j.keys) < j.max
}

// deadline returns the local deadline of key, if the journal holds it.
func (j *journal) deadline(key string) (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	d, ok := j.keys[key]
	return d, ok
}

// remove deletes key and reports whether this call removed it, so that of
// concurrent forwarders of one key exactly one accounts for it.
func (j *journal) remove(key string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.keys[key]; !ok {
		return false
	}
	delete(j.keys, key)
	if len(j.keys) == 0 {
		j.flags.And(^flagJournal)
	}
	return true
}

// batch returns up to n keys, leaving them in the journal.
func (j *journal) batch(n int) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	keys := make([]string, 0, min(n, len(j.keys)))
	for k := range j.keys {
		if len(keys) == n {
			break
		}
		keys = append(keys, k)
	}
	return keys
}

func (j *journal) len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.keys)
}
