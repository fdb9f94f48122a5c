package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
)

// dialect is what a server offers beyond Redis 6.2, which decides how the
// Store runs each operation. The zero dialect runs every operation that
// needs more than one command as a Lua script.
type dialect struct {
	// setGetNX: SET ... NX GET (Redis 7.0 and later). SetNX and Get run
	// as plain commands in one MULTI/EXEC transaction.
	setGetNX bool
	// ifEq: SET ... IFEQ and DELEX ... IFEQ (Redis 8.4 and later).
	// CompareAndSwap and CompareAndDelete run as one plain command.
	ifEq bool
}

// dialectOf returns the dialect of a server reporting version (INFO's
// redis_version, "7.0.15"). A version it cannot read gets the zero
// dialect, which every supported server runs.
func dialectOf(version string) dialect {
	major, rest, _ := strings.Cut(version, ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return dialect{}
	}
	atLeast := func(m, n int) bool { return ma > m || ma == m && mi >= n }
	return dialect{setGetNX: atLeast(7, 0), ifEq: atLeast(8, 4)}
}

// and returns what both d and o offer: a cluster runs what all its
// masters run.
func (d dialect) and(o dialect) dialect {
	return dialect{setGetNX: d.setGetNX && o.setGetNX, ifEq: d.ifEq && o.ifEq}
}

// dialect returns the server's dialect, detected on first use (INFO
// server on the server, or on every master of a cluster) and kept. A
// server that refuses INFO (a managed service's ACL, a renamed command)
// gets the zero dialect. An unreachable one returns the error, and the
// next operation tries again.
func (s *Store) dialect(ctx context.Context) (dialect, error) {
	if d := s.dial.Load(); d != nil {
		return *d, nil
	}
	var mu sync.Mutex
	d := dialect{setGetNX: true, ifEq: true}
	err := s.forEachNode(ctx, func(ctx context.Context, c Client, _ string) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		d = d.and(dialectOf(infoField(info, "redis_version")))
		return nil
	})
	if err != nil && isUnavailable(err) {
		return dialect{}, err
	}
	if err != nil {
		d = dialect{}
	}
	s.dial.Store(&d)
	return d, nil
}

// refused reports whether err is a server refusing a command form that
// the detected dialect promised (a failover to an older server, a
// command renamed away): ERR syntax error or ERR unknown command. The
// command did not run (nor, when it was queued in a transaction, did the
// transaction), so the operation can run again as a script; the dialect
// is forgotten and detected again on the next operation.
func (s *Store) refused(err error) bool {
	var rerr interface{ RedisError() }
	if !errors.As(err, &rerr) {
		return false
	}
	msg := err.Error()
	if s.noTx(err) {
		return false
	}
	if !strings.HasPrefix(msg, "ERR syntax error") && !strings.HasPrefix(msg, "ERR unknown command") {
		return false
	}
	s.dial.Store(nil)
	return true
}

// noTx reports whether err is a server refusing MULTI or EXEC itself (a
// proxy without transactions, MULTI renamed away), and if so makes the
// Store run every later operation as a script, which needs none. Unlike
// a refused command form, the commands sent after a refused MULTI did run,
// one by one: an operation that may have written must not run again.
func (s *Store) noTx(err error) bool {
	var rerr interface{ RedisError() }
	if !errors.As(err, &rerr) {
		return false
	}
	rest, ok := strings.CutPrefix(err.Error(), "ERR unknown command ")
	if !ok || rest == "" {
		return false
	}
	name, _, _ := strings.Cut(rest[1:], rest[:1]) // 'multi' (7.0) or `multi` (6.2)
	if !strings.EqualFold(name, "multi") && !strings.EqualFold(name, "exec") {
		return false
	}
	s.dial.Store(&dialect{})
	return true
}

// infoField returns the value of "name:value" in an INFO reply, or "".
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
