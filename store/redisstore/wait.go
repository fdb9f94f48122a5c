package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
)

// waitReply is the outcome of the WAIT sent after a write.
type waitReply struct {
	sent  bool  // a WAIT was sent (WithWaitReplicas is on)
	acked int64 // replicas that confirmed
	err   error // WAIT's own error
}

// runWrite runs a write script on key: alone (EVALSHA, falling back to
// EVAL on NOSCRIPT) or, with WithWaitReplicas, followed by WAIT in one
// pipeline.
func (s *Store) runWrite(ctx context.Context, sc *redis.Script, key string, args ...any) (any, waitReply, error) {
	keys := []string{key}
	if s.waitN == 0 {
		v, err := sc.Run(ctx, s.client, keys, args...).Result()
		return v, waitReply{}, err
	}
	var cmd *redis.Cmd
	w, err := s.withWait(ctx, key, func(p redis.Pipeliner) { cmd = sc.EvalSha(ctx, p, keys, args...) })
	if err == nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		w, err = s.withWait(ctx, key, func(p redis.Pipeliner) { cmd = sc.Eval(ctx, p, keys, args...) })
	}
	if err != nil {
		return nil, w, err
	}
	v, err := cmd.Result()
	return v, w, err
}

// runCmd runs one command on rk: alone or, with WithWaitReplicas,
// followed by WAIT in one pipeline.
func (s *Store) runCmd(ctx context.Context, rk string, args ...any) (any, waitReply, error) {
	if s.waitN == 0 {
		v, err := s.client.Do(ctx, args...).Result()
		return v, waitReply{}, err
	}
	var cmd *redis.Cmd
	w, err := s.withWait(ctx, rk, func(p redis.Pipeliner) { cmd = p.Do(ctx, args...) })
	if err != nil {
		return nil, w, err
	}
	v, err := cmd.Result()
	return v, w, err
}

// runString is runCmd for a command whose reply is a bulk string or nil
// (redis.Nil). It returns the reply's bytes, which are go-redis's own
// buffer for this reply (StringCmd.Bytes), not a copy.
func (s *Store) runString(ctx context.Context, rk string, args ...any) ([]byte, waitReply, error) {
	cmd := redis.NewStringCmd(ctx, args...)
	if s.waitN == 0 {
		_ = s.client.Process(ctx, cmd)
		v, err := cmd.Bytes()
		return v, waitReply{}, err
	}
	w, err := s.withWait(ctx, rk, func(p redis.Pipeliner) { _ = p.Process(ctx, cmd) })
	if err != nil {
		return nil, w, err
	}
	v, err := cmd.Bytes()
	return v, w, err
}

// getDel runs GETDEL on key: alone or, with WithWaitReplicas, followed
// by WAIT in one pipeline. It returns a copy of the value.
func (s *Store) getDel(ctx context.Context, key string) ([]byte, waitReply, error) {
	if s.waitN == 0 {
		v, err := s.client.GetDel(ctx, key).Bytes()
		return v, waitReply{}, err
	}
	var cmd *redis.StringCmd
	w, err := s.withWait(ctx, key, func(p redis.Pipeliner) { cmd = p.GetDel(ctx, key) })
	if err != nil {
		return nil, w, err
	}
	v, err := cmd.Bytes()
	return v, w, err
}

// withWait sends the command queue adds, then WAIT, in one pipeline on
// one connection to key's primary: WAIT counts the replicas that have
// every write made so far on its own connection. The commands' errors are
// left in their Cmds; the error returned is for failing to pick the node.
func (s *Store) withWait(ctx context.Context, key string, queue func(redis.Pipeliner)) (waitReply, error) {
	p, err := s.pipeline(ctx, key)
	if err != nil {
		return waitReply{}, err
	}
	queue(p)
	wait := p.Do(ctx, "wait", s.waitN, s.waitTimeout.Milliseconds())
	cmds, _ := p.Exec(ctx)
	s.reloadIfRedirected(ctx, cmds)
	acked, err := wait.Int64()
	return waitReply{sent: true, acked: acked, err: err}, nil
}

// reloadIfRedirected asks a cluster client to reload its slot map when a
// node answered MOVED or ASK. Unlike the ClusterClient, a node's pipeline
// does not follow redirections: the operation, which did not run, fails
// with store.ErrUnavailable, and the next one goes to the right node.
func (s *Store) reloadIfRedirected(ctx context.Context, cmds []redis.Cmder) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return
	}
	for _, c := range cmds {
		_, moved := redis.IsMovedError(c.Err())
		_, ask := redis.IsAskError(c.Err())
		if moved || ask {
			cc.ReloadState(ctx)
			return
		}
	}
}

// pipeline returns a pipeline bound to one connection to key's primary.
// A cluster pipeline would send the keyless WAIT to some other node, so
// on a cluster it is the pipeline of the master that holds key's slot.
func (s *Store) pipeline(ctx context.Context, key string) (redis.Pipeliner, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return s.client.Pipeline(), nil
	}
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	return node.Pipeline(), nil
}

// confirm returns nil when no WAIT was sent or enough replicas confirmed
// the write op made on rkey, and otherwise an error that says the write
// happened and wraps ErrNotReplicated and store.ErrUnavailable.
func (s *Store) confirm(op, rkey string, w waitReply) error {
	switch {
	case !w.sent:
		return nil
	case w.err != nil:
		return fmt.Errorf("redisstore: %s %s: the write was applied on the primary, but waiting for %d replicas failed: %w: %w: %w",
			op, keyRef(rkey), s.waitN, ErrNotReplicated, store.ErrUnavailable, w.err)
	case w.acked < int64(s.waitN):
		return fmt.Errorf("redisstore: %s %s: the write was applied on the primary, but only %d of %d replicas confirmed it within %v: %w: %w",
			op, keyRef(rkey), w.acked, s.waitN, s.waitTimeout, ErrNotReplicated, store.ErrUnavailable)
	}
	return nil
}
