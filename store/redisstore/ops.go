package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
)

// Operation names, used in errors.
const (
	opSetNX   = "setnx"
	opGet     = "get"
	opCAS     = "compare-and-swap"
	opCAD     = "compare-and-delete"
	opConsume = "consume"
)

// SetNX implements store.Store. It reads the existing entry's value and
// PTTL in the same atomic step as the SET NX that did not store: on Redis
// 7.0 and later with one MULTI/EXEC transaction holding SET ... NX PX GET
// and PTTL, otherwise (and with WithWaitReplicas) with one Lua script.
//
// An existing key without an expiry (PTTL -1) cannot have been written by
// a Store, which always sets one: someone else wrote or PERSISTed it.
// SetNX, like Get, then returns an error wrapping store.ErrCorrupt rather
// than invent a TTL. An entry in its last millisecond (PTTL 0) is reported
// with a TTL of 1 ms.
//
// With WithWaitReplicas, a stored value not confirmed by enough replicas
// returns set == true together with an error wrapping ErrNotReplicated.
func (s *Store) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := store.CheckSet(key, value, ttl); err != nil {
		return false, store.Entry{}, err
	}
	if err := checkCtx(ctx, opSetNX); err != nil {
		return false, store.Entry{}, err
	}
	rk := s.key(key)
	d, err := s.dialect(ctx)
	if err != nil {
		return false, store.Entry{}, s.fail(ctx, opSetNX, rk, err)
	}
	if d.setGetNX && s.waitN == 0 {
		set, e, err := s.setNXTx(ctx, rk, value, millis(ttl))
		if !errors.Is(err, errRefused) {
			return set, e, err
		}
	}
	return s.setNXScripted(ctx, rk, value, millis(ttl))
}

// setNXScripted runs SetNX as the Lua script (with WAIT, if set).
func (s *Store) setNXScripted(ctx context.Context, rk string, value []byte, ms int64) (bool, store.Entry, error) {
	reply, w, err := s.runWrite(ctx, setNXScript, rk, value, ms)
	if err != nil {
		return false, store.Entry{}, s.fail(ctx, opSetNX, rk, err)
	}
	if n, ok := reply.(int64); ok && n == 1 {
		return true, store.Entry{}, s.confirm(opSetNX, rk, w)
	}
	e, err := decodeEntry(opSetNX, rk, reply)
	return false, e, err
}

// setNXTx runs SET rk value NX PX ms GET and PTTL rk in one transaction:
// the PTTL is that of the value the SET returned. A refused transaction
// (see Store.refused), which ran nothing, returns errRefused.
func (s *Store) setNXTx(ctx context.Context, rk string, value []byte, ms int64) (bool, store.Entry, error) {
	p := s.client.TxPipeline()
	prev := p.Do(ctx, "set", rk, value, "nx", "px", ms, "get")
	pttl := p.Do(ctx, "pttl", rk)
	_, _ = p.Exec(ctx) // each command holds its own error
	v, err := prev.Text()
	switch {
	case errors.Is(err, redis.Nil):
		return true, store.Entry{}, nil
	case s.refused(err) || s.refused(pttl.Err()):
		return false, store.Entry{}, errRefused
	case err != nil:
		return false, store.Entry{}, s.fail(ctx, opSetNX, rk, err)
	}
	e, err := s.decodeTx(ctx, opSetNX, rk, v, pttl)
	return false, e, err
}

// SetNXValue implements store.SetNXValuer: SetNX without the existing
// entry's TTL. On Redis 7.0 and later it is one SET key value NX PX ttl
// GET command, which costs Redis about half of SetNX's transaction (it
// reads no PTTL and needs no MULTI/EXEC); with WithWaitReplicas that
// command is followed by WAIT in one pipeline, as every write is. On older
// servers, or one that refuses the command, it runs SetNX's Lua script.
//
// On Redis 7.0 and later it does not read the existing key's expiry, so
// a key someone else wrote without one is returned as it is, where SetNX
// (and the script on older servers) reports store.ErrCorrupt. A key
// holding a non-string value returns an error wrapping store.ErrCorrupt.
//
// With WithWaitReplicas, a stored value not confirmed by enough replicas
// returns set == true together with an error wrapping ErrNotReplicated.
func (s *Store) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	if err := store.CheckSet(key, value, ttl); err != nil {
		return false, nil, err
	}
	if err := checkCtx(ctx, opSetNX); err != nil {
		return false, nil, err
	}
	rk := s.key(key)
	d, err := s.dialect(ctx)
	if err != nil {
		return false, nil, s.fail(ctx, opSetNX, rk, err)
	}
	if d.setGetNX {
		old, w, err := s.runString(ctx, rk, "set", rk, value, "nx", "px", s.px(ttl), "get")
		switch {
		case errors.Is(err, redis.Nil):
			return true, nil, s.confirm(opSetNX, rk, w)
		case err == nil:
			return false, old, nil
		case !s.refused(err):
			return false, nil, s.fail(ctx, opSetNX, rk, err)
		}
	}
	set, e, err := s.setNXScripted(ctx, rk, value, millis(ttl))
	return set, e.Value, err
}

// errRefused reports a command form the server refused; see Store.refused.
var errRefused = errors.New("redisstore: command refused")

// Get implements store.Store. It reads the value and its PTTL in one
// atomic step: on Redis 7.0 and later with GET and PTTL in one MULTI/EXEC
// transaction, otherwise with one Lua script. See SetNX for keys without
// an expiry.
func (s *Store) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, err
	}
	if err := checkCtx(ctx, opGet); err != nil {
		return store.Entry{}, err
	}
	rk := s.key(key)
	d, err := s.dialect(ctx)
	if err != nil {
		return store.Entry{}, s.fail(ctx, opGet, rk, err)
	}
	if d.setGetNX {
		return s.getTx(ctx, rk)
	}
	return s.getScripted(ctx, rk)
}

// getScripted runs Get as the Lua script.
func (s *Store) getScripted(ctx context.Context, rk string) (store.Entry, error) {
	reply, err := getScript.Run(ctx, s.client, []string{rk}).Result()
	if errors.Is(err, redis.Nil) {
		return store.Entry{}, errNotFound
	}
	if err != nil {
		return store.Entry{}, s.fail(ctx, opGet, rk, err)
	}
	return decodeEntry(opGet, rk, reply)
}

// getTx runs GET rk and PTTL rk in one transaction.
func (s *Store) getTx(ctx context.Context, rk string) (store.Entry, error) {
	p := s.client.TxPipeline()
	get := p.Get(ctx, rk)
	pttl := p.Do(ctx, "pttl", rk)
	_, _ = p.Exec(ctx)
	v, err := get.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return store.Entry{}, errNotFound
	case s.noTx(err):
		return s.getScripted(ctx, rk) // GET and PTTL ran alone: nothing was written
	case err != nil:
		return store.Entry{}, s.fail(ctx, opGet, rk, err)
	}
	return s.decodeTx(ctx, opGet, rk, v, pttl)
}

// decodeTx returns the entry of value v whose PTTL cmd holds.
func (s *Store) decodeTx(ctx context.Context, op, rk, v string, cmd *redis.Cmd) (store.Entry, error) {
	pttl, err := cmd.Int64()
	if err != nil {
		return store.Entry{}, s.fail(ctx, op, rk, err)
	}
	return decodePair(op, rk, v, pttl)
}

// CompareAndSwap implements store.Store: with one SET ... IFEQ PX on Redis
// 8.4 and later, otherwise with one Lua script. With WithWaitReplicas, a
// swap not confirmed by enough replicas returns true together with an
// error wrapping ErrNotReplicated.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := store.CheckSwap(key, old, new, ttl); err != nil {
		return false, err
	}
	if err := checkCtx(ctx, opCAS); err != nil {
		return false, err
	}
	rk := s.key(key)
	native := []any{"set", rk, new, "ifeq", old, "px", s.px(ttl)}
	return s.compareAnd(ctx, opCAS, rk, native, casScript, old, new, millis(ttl))
}

// CompareAndDelete implements store.Store: with one DELEX ... IFEQ on
// Redis 8.4 and later, otherwise with one Lua script. With
// WithWaitReplicas, a delete not confirmed by enough replicas returns
// true together with an error wrapping ErrNotReplicated.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := store.CheckDelete(key, old); err != nil {
		return false, err
	}
	if err := checkCtx(ctx, opCAD); err != nil {
		return false, err
	}
	rk := s.key(key)
	return s.compareAnd(ctx, opCAD, rk, []any{"delex", rk, "ifeq", old}, cadScript, old)
}

// compareAnd runs native, a command that replies OK or 1 when it changed
// rk and nil or 0 when not, where the server offers SET/DELEX ... IFEQ,
// and otherwise the script sc, which returns 1 or 0.
func (s *Store) compareAnd(ctx context.Context, op, rk string, native []any, sc *redis.Script, args ...any) (bool, error) {
	d, err := s.dialect(ctx)
	if err != nil {
		return false, s.fail(ctx, op, rk, err)
	}
	var reply any
	var w waitReply
	if d.ifEq {
		reply, w, err = s.runCmd(ctx, rk, native...)
		if errors.Is(err, redis.Nil) {
			reply, err = int64(0), nil
		}
		if reply == "OK" {
			reply = int64(1)
		}
	}
	if !d.ifEq || s.refused(err) {
		reply, w, err = s.runWrite(ctx, sc, rk, args...)
	}
	if err != nil {
		return false, s.fail(ctx, op, rk, err)
	}
	n, ok := reply.(int64)
	if !ok || n < 0 || n > 1 {
		return false, unexpected(op, rk, reply)
	}
	if n == 0 {
		return false, nil
	}
	return true, s.confirm(op, rk, w)
}

// Consume implements store.Store with one GETDEL command (Redis 6.2 or
// later). With WithWaitReplicas, a consumption not confirmed by enough
// replicas returns the value together with an error wrapping
// ErrNotReplicated.
func (s *Store) Consume(ctx context.Context, key string) ([]byte, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	if err := checkCtx(ctx, opConsume); err != nil {
		return nil, err
	}
	rk := s.key(key)
	v, w, err := s.getDel(ctx, rk)
	if errors.Is(err, redis.Nil) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, s.fail(ctx, opConsume, rk, err)
	}
	return v, s.confirm(opConsume, rk, w)
}

// decodeEntry decodes a script's {value, pttl} reply for rkey.
func decodeEntry(op, rkey string, reply any) (store.Entry, error) {
	pair, ok := reply.([]any)
	if !ok || len(pair) != 2 {
		return store.Entry{}, unexpected(op, rkey, reply)
	}
	v, ok1 := pair[0].(string)
	pttl, ok2 := pair[1].(int64)
	if !ok1 || !ok2 {
		return store.Entry{}, unexpected(op, rkey, reply)
	}
	return decodePair(op, rkey, v, pttl)
}

// decodePair returns the entry of value v read together with its pttl.
func decodePair(op, rkey, v string, pttl int64) (store.Entry, error) {
	if pttl < -1 {
		return store.Entry{}, unexpected(op, rkey, pttl)
	}
	if pttl == -1 {
		return store.Entry{}, corrupt(op, rkey, errors.New("the key has no expiry: it was not written by redisstore"))
	}
	return store.Entry{Value: []byte(v), TTL: max(time.Duration(pttl), 1) * time.Millisecond}, nil
}

// unexpected reports a reply the Store does not understand. It names the
// reply's type only: a value may hold secrets.
func unexpected(op, rkey string, reply any) error {
	return fmt.Errorf("redisstore: %s %s: unexpected reply of type %T", op, keyRef(rkey), reply)
}

// millis returns ttl, rounded up to a whole millisecond, in milliseconds,
// the unit of SET PX.
func millis(ttl time.Duration) int64 {
	return store.RoundTTL(ttl).Milliseconds()
}

// pxArg is a TTL's PX argument, millis(ttl) in decimal, boxed once.
type pxArg struct {
	ttl time.Duration
	arg any
}

// pxSlots is how many TTLs' PX arguments a Store keeps: an engine's lease
// and retention, and room for a window or token TTL.
const pxSlots = 4

// px returns millis(ttl) as a command argument. An engine claims with its
// lease and completes with its retention call after call, so the Store
// keeps the last few TTLs' arguments boxed: go-redis then writes them as
// they are, without allocating or formatting them again. Another TTL
// replaces the oldest.
func (s *Store) px(ttl time.Duration) any {
	for i := range s.pxArgs {
		if a := s.pxArgs[i].Load(); a != nil && a.ttl == ttl {
			return a.arg
		}
	}
	a := &pxArg{ttl: ttl, arg: strconv.FormatInt(millis(ttl), 10)}
	s.pxArgs[s.pxNext.Add(1)%pxSlots].Store(a)
	return a.arg
}
