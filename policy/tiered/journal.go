package tiered

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxDeferredDeletes bounds the deferred deletes a journal keeps per key;
// the engine makes at most a few per key (an undone claim, a release).
const maxDeferredDeletes = 8

// journalEntry is what a Tiered must still do on the primary for one key.
type journalEntry struct {
	// expires is the local time the value the fallback holds for the key
	// expires; zero when the fallback holds nothing of this outage.
	expires time.Time
	// deletes are CompareAndDeletes the primary has not confirmed.
	deletes [][]byte
}

// journal remembers, per key, what a Tiered owes its primary: the value it
// wrote to the fallback (to copy forward) and the deletes the primary did
// not confirm (to replay), until the primary has them. It is bounded: when
// full it first drops expired values (at most once a second), then refuses
// new keys. While it holds keys it sets flagJournal in flags.
type journal struct {
	mu        sync.Mutex
	keys      map[string]*journalEntry
	max       int
	flags     *atomic.Uint32
	nextPrune time.Time
}

func newJournal(max int, flags *atomic.Uint32) *journal {
	return &journal{keys: make(map[string]*journalEntry), max: max, flags: flags}
}

// entry returns key's entry, creating it if there is room. j.mu is held.
func (j *journal) entry(key string) *journalEntry {
	if e, ok := j.keys[key]; ok {
		return e
	}
	if len(j.keys) >= j.max && !j.prune() {
		return nil
	}
	e := &journalEntry{}
	j.keys[key] = e
	j.flags.Or(flagJournal)
	return e
}

// add records that the fallback holds a value for key until expires. It
// reports false when the journal is full and key is not in it.
func (j *journal) add(key string, expires time.Time) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.entry(key)
	if e == nil {
		return false
	}
	e.expires = expires
	return true
}

// deferDelete records a CompareAndDelete of key, old that the primary must
// still get. It reports false when there is no room for it.
func (j *journal) deferDelete(key string, old []byte) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.entry(key)
	if e == nil {
		return false
	}
	if slices.ContainsFunc(e.deletes, func(d []byte) bool { return bytes.Equal(d, old) }) {
		return true
	}
	if len(e.deletes) >= maxDeferredDeletes {
		return false
	}
	e.deletes = append(e.deletes, bytes.Clone(old))
	return true
}

// prune drops entries whose value expired and that owe no delete, at most
// once a second, and reports whether there is room afterwards. j.mu is
// held.
func (j *journal) prune() bool {
	now := time.Now()
	if now.Before(j.nextPrune) {
		return false
	}
	j.nextPrune = now.Add(time.Second)
	for k, e := range j.keys {
		if len(e.deletes) == 0 && !e.expires.After(now) {
			delete(j.keys, k)
		}
	}
	return len(j.keys) < j.max
}

// get returns a copy of key's entry, if the journal holds it.
func (j *journal) get(key string) (journalEntry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.keys[key]
	if !ok {
		return journalEntry{}, false
	}
	return journalEntry{expires: e.expires, deletes: slices.Clone(e.deletes)}, true
}

// holds reports whether the fallback received a value for key that the
// primary does not have yet: only then is the fallback's "absent" an answer.
func (j *journal) holds(key string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.keys[key]
	return ok && !e.expires.IsZero()
}

// replayed removes the first n deferred deletes of key.
func (j *journal) replayed(key string, n int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if e, ok := j.keys[key]; ok {
		e.deletes = e.deletes[min(n, len(e.deletes)):]
		j.drop(key, e)
	}
}

// settle forgets key's value and reports whether this call forgot it, so
// that of concurrent forwarders of one key exactly one accounts for it.
func (j *journal) settle(key string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.keys[key]
	if !ok || e.expires.IsZero() {
		return false
	}
	e.expires = time.Time{}
	j.drop(key, e)
	return true
}

// drop removes e, key's entry, once it owes nothing. j.mu is held.
func (j *journal) drop(key string, e *journalEntry) {
	if !e.expires.IsZero() || len(e.deletes) > 0 {
		return
	}
	delete(j.keys, key)
	if len(j.keys) == 0 {
		j.flags.And(^flagJournal)
	}
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

// held returns the keys starting with prefix whose value the fallback
// holds for the primary.
func (j *journal) held(prefix string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var keys []string
	for k, e := range j.keys {
		if !e.expires.IsZero() && strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	return keys
}
