package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
)

// errNotFound is returned, shared, for every absent key: a miss is a hot
// path and needs no allocation.
var errNotFound = fmt.Errorf("redisstore: %w", store.ErrNotFound)

// unavailableCodes are the Redis error replies that mean the server
// cannot serve the request now, although it may later: it is loading,
// read-only (a demoted primary), cut off from its master or cluster,
// migrating a slot, out of memory, short of replicas (min-replicas),
// refusing writes after a failed snapshot (MISCONF), busy with a script,
// or out of client slots.
var unavailableCodes = []string{
	"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
	"MOVED", "ASK", "OOM", "NOREPLICAS", "MISCONF", "BUSY", "max number of clients",
}

// scriptErrorMarker starts the reply of a script whose redis.call failed,
// before Redis 7.0: "ERR Error running script (call to f_<sha>):
// @user_script:N: @user_script: N: -CODE message". Redis 7.0 and later
// reply "CODE message script: ..." instead.
const scriptErrorMarker = "Error running script"

// checkCtx returns the error for op when ctx is already done, so that no
// command is sent on behalf of a caller who has given up.
func checkCtx(ctx context.Context, op string) error {
	if ctxDone(ctx) == nil {
		return nil
	}
	return ctxError(ctx, op, nil)
}

// ctxDone returns ctx.Err(), or context.DeadlineExceeded when ctx's
// deadline has passed but its timer has not fired yet. With
// ContextTimeoutEnabled, go-redis sets the socket deadline to ctx's
// deadline, and the resulting i/o timeout can reach the Store before ctx
// itself reports it.
func ctxDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// fail turns an error from go-redis into the Store's error for op on
// rkey (the Redis key, named only by keyRef; "" when the operation has
// none):
//
//   - ctx done: wraps ctx.Err(), plus store.ErrUnavailable for a deadline;
//   - a transport failure (refused or reset connection, i/o timeout, pool
//     timeout, closed client) or an unavailableCodes reply: wraps
//     store.ErrUnavailable;
//   - WRONGTYPE (the key holds a non-string): wraps store.ErrCorrupt;
//   - any other Redis error reply: returned wrapped, as is.
func (s *Store) fail(ctx context.Context, op, rkey string, err error) error {
	switch {
	case ctxDone(ctx) != nil:
		return ctxError(ctx, op, err)
	case isUnavailable(err):
		return store.Unavailable("redisstore: "+op, err)
	case hasCode(err, "WRONGTYPE"):
		return corrupt(op, rkey, err)
	}
	if rkey == "" {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return fmt.Errorf("redisstore: %s %s: %w", op, keyRef(rkey), err)
}

// ctxError wraps ctxDone(ctx), and err when not nil; a passed deadline
// also wraps store.ErrUnavailable.
func ctxError(ctx context.Context, op string, err error) error {
	cerr := ctxDone(ctx)
	var e error = cerr
	if err != nil {
		e = fmt.Errorf("%w (%w)", cerr, err)
	}
	if errors.Is(cerr, context.DeadlineExceeded) {
		return store.Unavailable("redisstore: "+op, e)
	}
	return fmt.Errorf("redisstore: %s: %w", op, e)
}

// isUnavailable reports whether err means Redis could not serve the
// request: anything that is not a Redis error reply (so a network, pool
// or client failure), or a reply in unavailableCodes.
func isUnavailable(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true
	}
	for _, code := range unavailableCodes {
		if hasCode(err, code) {
			return true
		}
	}
	return false
}

// hasCode reports whether err is a Redis error reply with the given code
// (or message prefix), either directly or, before Redis 7.0, as the
// "-CODE ..." error that a redis.call inside a script raised.
func hasCode(err error, code string) bool {
	if redis.HasErrorPrefix(err, code) {
		return true
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	if !strings.Contains(msg, scriptErrorMarker) {
		return false
	}
	i := strings.LastIndex(msg, ": -")
	return i >= 0 && strings.HasPrefix(msg[i+len(": -"):], code)
}

// corrupt returns an error wrapping store.ErrCorrupt about rkey.
func corrupt(op, rkey string, err error) error {
	return fmt.Errorf("redisstore: %s %s: %w: %w", op, keyRef(rkey), store.ErrCorrupt, err)
}

// keyRef names the Redis key rkey in an error without revealing it:
// "key " and the first 12 hex digits of its SHA-256. Keys can hold
// secrets (a caller's key, a token), and errors reach logs and clients;
// an operator finds the key by hashing the names SCAN returns.
func keyRef(rkey string) string {
	sum := sha256.Sum256([]byte(rkey))
	return "key " + hex.EncodeToString(sum[:6])
}
