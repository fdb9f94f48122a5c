package storetest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// batchCases check store.Batcher; Run skips them for other stores.
func batchCases() []testCase {
	return []testCase{
		{name: "Batch/Empty", f: batched(testBatchEmpty), batch: true},
		{name: "Batch/MixedNewHeldExpired", f: batched(testBatchMixed), batch: true},
		{name: "Batch/DuplicateKeys", f: batched(testBatchDuplicates), batch: true},
		{name: "Batch/Invalid", f: batched(testBatchInvalid), batch: true},
		{name: "Batch/Isolation", f: batched(testBatchIsolation), batch: true},
		{name: "Batch/Context", f: batched(testBatchCtx), batch: true},
		{name: "Batch/RaceOverlapping", f: batched(func(c *checker, s batchStore) { testBatchRace(c, s, false) }), batch: true},
		{name: "Batch/RaceWithSetNX", f: batched(func(c *checker, s batchStore) { testBatchRace(c, s, true) }), batch: true},
	}
}

// batchStore is a Store that implements store.Batcher.
type batchStore interface {
	store.Store
	store.Batcher
}

// batched adapts a batch case to a testCase; cases() marks it so that it
// only runs against a store.Batcher.
func batched(f func(c *checker, s batchStore)) func(c *checker, s store.Store) {
	return func(c *checker, s store.Store) { f(c, s.(batchStore)) }
}

// item builds a BatchItem.
func item(key, value string, ttl time.Duration) store.BatchItem {
	return store.BatchItem{Key: key, Value: []byte(value), TTL: ttl}
}

// batch runs SetNXBatch and checks that it succeeded with one result per
// item.
func (c *checker) batch(s batchStore, items []store.BatchItem, what string) ([]store.BatchResult, bool) {
	res, err := s.SetNXBatch(c.ctx, items)
	call := fmt.Sprintf("SetNXBatch of %s", what)
	return res, c.noError(err, ruleBatch, call) &&
		c.expect(len(res) == len(items), ruleBatch, "%s returned %d results for %d items", call, len(res), len(items))
}

// claimed checks result i of a batch: set, or not set and showing want
// with a TTL near wantTTL.
func (c *checker) claimed(res []store.BatchResult, i int, set bool, want string, wantTTL time.Duration, rule string) {
	r, call := res[i], "SetNXBatch result "+strconv.Itoa(i)
	if set {
		c.expect(r.Set, rule, "%s: Set = false, want true", call)
		return
	}
	if c.expect(!r.Set, rule, "%s: Set = true for a held key", call) &&
		c.expect(r.Existing.Value != nil && string(r.Existing.Value) == want, rule,
			"%s: Existing.Value = %q, want %q", call, r.Existing.Value, want) {
		c.ttlNear(r.Existing.TTL, wantTTL, rule, call)
	}
}

func testBatchEmpty(c *checker, s batchStore) {
	for _, items := range [][]store.BatchItem{nil, {}} {
		res, err := s.SetNXBatch(c.ctx, items)
		c.noError(err, ruleBatch, "SetNXBatch of no items")
		c.expect(len(res) == 0, ruleBatch, "SetNXBatch of no items returned %d results", len(res))
	}
}

func testBatchMixed(c *checker, s batchStore) {
	if !c.set(s, "held", []byte("h"), 10*time.Second) || !c.set(s, "expired", []byte("old"), shortTTL) {
		return
	}
	c.sleep(expirySleep)
	frac := 20*time.Second + time.Nanosecond
	items := []store.BatchItem{
		item("new1", "n1", 10*time.Second), item("held", "x", time.Hour),
		item("expired", "e2", 10*time.Second), item("new2", "n2", frac),
	}
	res, ok := c.batch(s, items, "new, held, expired and new keys")
	if !ok {
		return
	}
	c.claimed(res, 0, true, "", 0, ruleBatch)
	c.claimed(res, 1, false, "h", 10*time.Second, ruleBatch)
	c.claimed(res, 2, true, "", 0, ruleExpired)
	c.claimed(res, 3, true, "", 0, ruleBatch)
	for _, kv := range []struct {
		key, value string
		ttl        time.Duration
	}{{"new1", "n1", 10 * time.Second}, {"held", "h", 10 * time.Second}, {"expired", "e2", 10 * time.Second}, {"new2", "n2", store.RoundTTL(frac)}} {
		if e, ok := c.holds(s, kv.key, []byte(kv.value), ruleBatch); ok {
			c.ttlNear(e.TTL, kv.ttl, ruleBatch, fmt.Sprintf("Get(%q) after the batch", kv.key))
		}
	}
}

func testBatchDuplicates(c *checker, s batchStore) {
	if !c.set(s, "held", []byte("h"), 10*time.Second) {
		return
	}
	items := []store.BatchItem{
		item("a", "1", 10*time.Second), item("b", "2", time.Hour), item("a", "3", time.Hour),
		item("held", "x", time.Hour), item("a", "4", time.Minute), item("held", "y", time.Minute),
	}
	res, ok := c.batch(s, items, "a batch naming keys more than once")
	if !ok {
		return
	}
	c.claimed(res, 0, true, "", 0, ruleBatchDup)
	c.claimed(res, 1, true, "", 0, ruleBatchDup)
	c.claimed(res, 2, false, "1", 10*time.Second, ruleBatchDup)
	c.claimed(res, 3, false, "h", 10*time.Second, ruleBatchDup)
	c.claimed(res, 4, false, "1", 10*time.Second, ruleBatchDup)
	c.claimed(res, 5, false, "h", 10*time.Second, ruleBatchDup)
	for key, want := range map[string]string{"a": "1", "b": "2", "held": "h"} {
		if e, ok := c.holds(s, key, []byte(want), ruleBatchDup); ok && key != "b" {
			c.ttlNear(e.TTL, 10*time.Second, ruleBatchDup, fmt.Sprintf("Get(%q) after the batch", key))
		}
	}
}

func testBatchInvalid(c *checker, s batchStore) {
	check, ok := setupInvalid(c, s)
	if !ok {
		return
	}
	bad := []store.BatchItem{
		{Key: "", Value: []byte("x"), TTL: time.Hour},
		{Key: longKey, Value: []byte("x"), TTL: time.Hour},
		{Key: "new", Value: nil, TTL: time.Hour},
		{Key: "new", Value: make([]byte, store.MaxValueLen+1), TTL: time.Hour},
		{Key: "k", Value: nil, TTL: time.Hour},
	}
	for _, ttl := range badTTLs {
		bad = append(bad, store.BatchItem{Key: "new", Value: []byte("x"), TTL: ttl})
	}
	for i, b := range bad {
		valid := []store.BatchItem{item("new1", "1", time.Hour), item("new2", "2", time.Hour), item("k", "3", time.Hour)}
		at := i % (len(valid) + 1) // first, between, last
		items := append(valid[:at:at], append([]store.BatchItem{b}, valid[at:]...)...)
		res, err := s.SetNXBatch(c.ctx, items)
		call := fmt.Sprintf("SetNXBatch with item %d of key of %d bytes, %s, ttl %v", at, len(b.Key), describe(b.Value), b.TTL)
		c.isErr(err, store.ErrInvalid, ruleBatchInvalid, call)
		for j, r := range res {
			c.expect(!r.Set, ruleBatchInvalid, "%s: result %d reports Set", call, j)
		}
		c.absent(s, "new1", ruleBatchInvalid)
		c.absent(s, "new2", ruleBatchInvalid)
	}
	check()
}

func testBatchIsolation(c *checker, s batchStore) {
	if !c.set(s, "held", []byte("original"), longTTL) {
		return
	}
	items := []store.BatchItem{item("new", "original", longTTL), item("held", "other", longTTL)}
	res, ok := c.batch(s, items, "a new and a held key")
	if !ok || !c.expect(!res[1].Set, ruleBatch, "SetNXBatch result 1: Set = true for a held key") {
		return
	}
	scribble(items[0].Value)
	scribble(res[1].Existing.Value)
	c.holds(s, "new", []byte("original"), ruleCopy)
	c.holds(s, "held", []byte("original"), ruleCopy)
}

// testBatchCtx runs a one-item batch under a cancelled and under an
// expired context: the store may run it, but if it fails the error wraps
// ctx.Err() (and ErrUnavailable for a deadline) and the key stays absent.
func testBatchCtx(c *checker, s batchStore) {
	cancelled, cancel := context.WithCancel(c.ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(c.ctx, time.Now().Add(-time.Second))
	defer cancel2()
	for n, ctx := range []context.Context{cancelled, expired} {
		key := "done:" + strconv.Itoa(n)
		res, err := s.SetNXBatch(ctx, []store.BatchItem{item(key, "v", longTTL)})
		if c.ctxErr(ctx, err, "SetNXBatch") {
			c.absent(s, key, ruleCtx)
			continue
		}
		if c.expect(len(res) == 1 && res[0].Set, ruleBatch, "SetNXBatch of an absent key under a done context = %+v, want it set", res) {
			c.holds(s, key, []byte("v"), ruleBatch)
		}
	}
}

// Batch race parameters: batchRacers goroutines each claim batchWindow of
// batchKeys keys, windows overlapping and walked in alternating
// directions, so that every key is raced by batchRacers*batchWindow/batchKeys
// goroutines.
const (
	batchRacers = 16
	batchKeys   = 32
	batchWindow = 16
)

// batchWindowKeys returns the keys racer g claims in a round.
func batchWindowKeys(prefix string, g int) []string {
	keys := make([]string, batchWindow)
	for j := range keys {
		k := (2*g + j) % batchKeys
		if g%2 == 1 {
			k = (2*g + batchWindow - 1 - j) % batchKeys
		}
		keys[j] = prefix + ":" + strconv.Itoa(k)
	}
	return keys
}

// testBatchRace races overlapping batches; with singles, every fourth
// racer claims its keys one SetNX at a time instead. Every key must have
// exactly one winner, shown to every loser, and hold its value; each round
// removes its keys.
func testBatchRace(c *checker, s batchStore, singles bool) {
	for r := range rounds {
		prefix := "batch:" + strconv.Itoa(r)
		keys := make([][]string, batchRacers)
		res, errs := make([][]store.BatchResult, batchRacers), make([]error, batchRacers)
		race(batchRacers, func(g int) {
			keys[g] = batchWindowKeys(prefix, g)
			if singles && g%4 == 3 {
				res[g], errs[g] = setEach(c.ctx, s, keys[g], racerValue(g))
				return
			}
			items := make([]store.BatchItem, len(keys[g]))
			for j, k := range keys[g] {
				items[j] = store.BatchItem{Key: k, Value: racerValue(g), TTL: longTTL}
			}
			res[g], errs[g] = s.SetNXBatch(c.ctx, items)
		})
		if !c.batchRaceOutcome(s, keys, res, errs) {
			return
		}
	}
}

// setEach claims keys one SetNX at a time, reporting as a batch would.
func setEach(ctx context.Context, s store.Store, keys []string, value []byte) ([]store.BatchResult, error) {
	res := make([]store.BatchResult, len(keys))
	for j, k := range keys {
		var err error
		if res[j].Set, res[j].Existing, err = s.SetNX(ctx, k, value, longTTL); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// batchRaceOutcome checks one round of a batch race.
func (c *checker) batchRaceOutcome(s store.Store, keys [][]string, res [][]store.BatchResult, errs []error) bool {
	what := fmt.Sprintf("%d goroutines claiming overlapping batches", batchRacers)
	winner, seen := map[string][]int{}, map[string][]string{}
	for g := range keys {
		if !c.noError(errs[g], ruleConcurrent, fmt.Sprintf("%s: racer %d", what, g)) ||
			!c.expect(len(res[g]) == len(keys[g]), ruleBatch, "%s: racer %d got %d results for %d items", what, g, len(res[g]), len(keys[g])) {
			return false
		}
		for j, k := range keys[g] {
			if res[g][j].Set {
				winner[k] = append(winner[k], g)
			} else {
				seen[k] = append(seen[k], string(res[g][j].Existing.Value))
			}
		}
	}
	for k, ws := range winner {
		if !c.expect(len(ws) == 1, ruleAtomic, "%s: key %q won by racers %v", what, k, ws) {
			return false
		}
		want := string(racerValue(ws[0]))
		for _, v := range seen[k] {
			if !c.expect(v == want, ruleBatch, "%s: a loser of key %q was shown %q, want the winner's %q", what, k, v, want) {
				return false
			}
		}
		if _, ok := c.holds(s, k, []byte(want), ruleAtomic); !ok {
			return false
		}
		// Remove the key, so that a race holds few keys at a time.
		deleted, err := s.CompareAndDelete(c.ctx, k, []byte(want))
		if !c.noError(err, ruleCAD, "CompareAndDelete after the race") ||
			!c.expect(deleted, ruleCAD, "CompareAndDelete(%q, %q) of the value just read reported false", k, want) {
			return false
		}
	}
	if len(winner) == batchKeys {
		return true
	}
	c.errorf(ruleAtomic, "%s: %d of %d keys were won, want every one; nobody won %s",
		what, len(winner), batchKeys, strings.Join(unwon(keys, winner), ", "))
	return false
}

// unwon lists the raced keys nobody won.
func unwon(keys [][]string, winner map[string][]int) []string {
	var out []string
	listed := map[string]bool{}
	for _, ks := range keys {
		for _, k := range ks {
			if _, ok := winner[k]; !ok && !listed[k] {
				out = append(out, strconv.Quote(k))
				listed[k] = true
			}
		}
	}
	return out
}
