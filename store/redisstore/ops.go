package redisstore

import (
	"context"
	"errors"
	"fmt"
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

// SetNX implements store.Store. It runs one Lua script: SET NX PX and,
// when the key exists, GET and PTTL in the same atomic step.
//
// An existing key without an expiry (PTTL -1) cannot have been written by
// a Store, which always sets one: someone else wrote or PERSISTed it.
// SetNX, like Get, then returns an error wrapping store.ErrCorrupt rather
// than invent a TTL. An entry in its last
// millisecond (PTTL 0) is reported with a TTL of 1 ms.
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
	reply, w, err := s.runWrite(ctx, setNXScript, rk, value, millis(ttl))
	if err != nil {
		return false, store.Entry{}, s.fail(ctx, opSetNX, rk, err)
	}
	if n, ok := reply.(int64); ok && n == 1 {
		return true, store.Entry{}, s.confirm(opSetNX, rk, w)
	}
	e, err := decodeEntry(opSetNX, rk, reply)
	return false, e, err
}

// Get implements store.Store. It runs one Lua script reading the value
// and its PTTL in the same atomic step. See SetNX for keys without an
// expiry.
func (s *Store) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, err
	}
	if err := checkCtx(ctx, opGet); err != nil {
		return store.Entry{}, err
	}
	rk := s.key(key)
	reply, err := getScript.Run(ctx, s.client, []string{rk}).Result()
	if errors.Is(err, redis.Nil) {
		return store.Entry{}, errNotFound
	}
	if err != nil {
		return store.Entry{}, s.fail(ctx, opGet, rk, err)
	}
	return decodeEntry(opGet, rk, reply)
}

// CompareAndSwap implements store.Store with one Lua script. With
// WithWaitReplicas, a swap not confirmed by enough replicas returns true
// together with an error wrapping ErrNotReplicated.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := store.CheckSwap(key, old, new, ttl); err != nil {
		return false, err
	}
	if err := checkCtx(ctx, opCAS); err != nil {
		return false, err
	}
	return s.compareAnd(ctx, opCAS, casScript, key, old, new, millis(ttl))
}

// CompareAndDelete implements store.Store with one Lua script. With
// WithWaitReplicas, a delete not confirmed by enough replicas returns true
// together with an error wrapping ErrNotReplicated.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := store.CheckDelete(key, old); err != nil {
		return false, err
	}
	if err := checkCtx(ctx, opCAD); err != nil {
		return false, err
	}
	return s.compareAnd(ctx, opCAD, cadScript, key, old)
}

// compareAnd runs a script that returns 1 when it changed key, 0 when not.
func (s *Store) compareAnd(ctx context.Context, op string, sc *redis.Script, key string, args ...any) (bool, error) {
	rk := s.key(key)
	reply, w, err := s.runWrite(ctx, sc, rk, args...)
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
	if !ok1 || !ok2 || pttl < -1 {
		return store.Entry{}, unexpected(op, rkey, reply)
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
