package idemgrpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

// Secrets the error paths below must never reveal.
const (
	secretKey       = "k-SECRET-KEY-4242"
	secretPrincipal = "p-SECRET-USER-4242"
	secretToken     = "t-SECRET-TOKEN-4242"
)

// keyStore wraps a store, records every key the engine uses, and can fail
// or corrupt every operation with an error that names the key, as real
// backends' errors do.
type keyStore struct {
	store.Store
	mode string // "", "fail" or "corrupt"

	mu   sync.Mutex
	keys []string
}

func (s *keyStore) seen(key string) error {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	if s.mode == "fail" {
		return fmt.Errorf("%w: backend refused key %q", store.ErrInvalid, key)
	}
	return nil
}

func (s *keyStore) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := s.seen(key); err != nil {
		return false, store.Entry{}, err
	}
	if s.mode == "corrupt" {
		return false, store.Entry{Value: []byte("garbage for " + key), TTL: time.Minute}, nil
	}
	return s.Store.SetNX(ctx, key, v, ttl)
}

func (s *keyStore) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := s.seen(key); err != nil {
		return store.Entry{}, err
	}
	return s.Store.Get(ctx, key)
}

func (s *keyStore) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	if err := s.seen(key); err != nil {
		return false, err
	}
	return s.Store.CompareAndSwap(ctx, key, old, v, ttl)
}

func (s *keyStore) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := s.seen(key); err != nil {
		return false, err
	}
	return s.Store.CompareAndDelete(ctx, key, old)
}

func (s *keyStore) recorded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

func newKeyStore(t *testing.T, mode string) *keyStore {
	ms := testkit.NewMem(t)
	return &keyStore{Store: ms, mode: mode}
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// leakCheck collects every text a client or a log receives on one server.
type leakCheck struct {
	t    *testing.T
	log  syncBuffer
	seen []string // status messages and details, headers and trailers
}

// engine returns an engine over s whose observer logs at Debug into the
// check's buffer.
func (lc *leakCheck) engine(s store.Store) *idemkit.Engine {
	logger := slog.New(slog.NewTextHandler(&lc.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e, err := idemkit.New(s, idemkit.WithObserver(idemkit.SlogObserver(logger)))
	require.NoError(lc.t, err)
	return e
}

// serve serves the test service behind a Server over e. The principal is
// secretPrincipal for a caller with an x-user entry; without one, the
// principal function fails with an error quoting the caller's token.
func (lc *leakCheck) serve(e *idemkit.Engine, opts ...idemgrpc.Option) (*grpc.ClientConn, *orders) {
	srv := &orders{}
	principal := func(ctx context.Context) (string, error) {
		if _, err := userPrincipal(ctx); err != nil {
			return "", errors.New("no session for bearer token " + secretToken)
		}
		return secretPrincipal, nil
	}
	opts = append([]idemgrpc.Option{idemgrpc.WithMethods(methodCreate, methodWatch), idemgrpc.WithPrincipal(principal)}, opts...)
	s := newServer(lc.t, e, opts...)
	return serve(lc.t, srv, []grpc.ServerOption{
		grpc.UnaryInterceptor(s.UnaryServerInterceptor()),
		grpc.StreamInterceptor(s.StreamServerInterceptor()),
	}), srv
}

// unary makes a Create call with the secret key and records what came back.
func (lc *leakCheck) unary(conn *grpc.ClientConn, user string, in *structpb.Struct) error {
	var hdr, tlr metadata.MD
	err := conn.Invoke(callCtx(lc.t, user, secretKey), methodCreate, in, new(structpb.Struct), grpc.Header(&hdr), grpc.Trailer(&tlr))
	lc.record(err, hdr, tlr)
	return err
}

// stream opens a Watch stream with the secret key and records its end.
func (lc *leakCheck) stream(conn *grpc.ClientConn, user string) error {
	_, err := watch(callCtx(lc.t, user, secretKey), conn, methodWatch, mustStruct(lc.t, nil))
	lc.record(err, nil, nil)
	return err
}

func (lc *leakCheck) record(err error, mds ...metadata.MD) {
	if err != nil {
		lc.seen = append(lc.seen, prototext.Format(status.Convert(err).Proto()))
	}
	for _, md := range mds {
		lc.seen = append(lc.seen, fmt.Sprint(md))
	}
}

// check asserts that no recorded text and no log line holds a secret.
func (lc *leakCheck) check() {
	lc.t.Helper()
	lines := strings.Split(lc.log.String(), "\n")
	for _, text := range append(lc.seen, lines...) {
		for _, secret := range []string{secretKey, secretPrincipal, secretToken} {
			assert.NotContains(lc.t, text, secret)
		}
	}
}

// Every error path is driven with a capturing logger: no status message or
// detail, header, trailer or log line holds the raw key, the principal or
// the caller's token.
func TestStatusesRevealNoSecrets(t *testing.T) {
	t.Run("store down", func(t *testing.T) {
		lc := &leakCheck{t: t}
		conn, _ := lc.serve(lc.engine(storetest.Unavailable()))
		assert.Equal(t, codes.Unavailable, code(lc.unary(conn, "u", mustStruct(t, nil))))
		assert.Equal(t, codes.Unavailable, code(lc.stream(conn, "u")))
		lc.check()
	})
	t.Run("store error naming the key", func(t *testing.T) {
		lc := &leakCheck{t: t}
		conn, srv := lc.serve(lc.engine(newKeyStore(t, "fail")))
		assert.Equal(t, codes.Internal, code(lc.unary(conn, "u", mustStruct(t, nil))))
		assert.Equal(t, codes.Internal, code(lc.stream(conn, "u")))
		assert.Zero(t, srv.runs.Load())
		assert.Contains(t, lc.log.String(), "backend refused key", "the operator still sees the cause")
		lc.check()
	})
	t.Run("store error naming a readable key", func(t *testing.T) {
		// With WithReadableKeys (debugging) store keys, hence store
		// errors, hold the raw key and principal: still none reaches
		// the client.
		lc := &leakCheck{t: t}
		e, err := idemkit.New(newKeyStore(t, "fail"), idemkit.WithReadableKeys(),
			idemkit.WithObserver(idemkit.SlogObserver(slog.New(slog.NewTextHandler(&lc.log, &slog.HandlerOptions{Level: slog.LevelDebug})))))
		require.NoError(t, err)
		conn, _ := lc.serve(e)
		assert.Equal(t, codes.Internal, code(lc.unary(conn, "u", mustStruct(t, nil))))
		assert.Equal(t, codes.Internal, code(lc.stream(conn, "u")))
		require.Contains(t, lc.log.String(), secretPrincipal, "the store error does name the principal")
		lc.log.reset() // the engine's debugging mode logs it; the adapter must not send it
		lc.check()
	})
	t.Run("corrupt record", func(t *testing.T) {
		lc := &leakCheck{t: t}
		conn, srv := lc.serve(lc.engine(newKeyStore(t, "corrupt")))
		assert.Equal(t, codes.Internal, code(lc.unary(conn, "u", mustStruct(t, nil))))
		assert.Zero(t, srv.runs.Load())
		lc.check()
	})
	t.Run("principal error", func(t *testing.T) {
		lc := &leakCheck{t: t}
		conn, _ := lc.serve(lc.engine(newKeyStore(t, "")))
		assert.Equal(t, codes.Unauthenticated, code(lc.unary(conn, "", mustStruct(t, nil))))
		assert.Equal(t, codes.Unauthenticated, code(lc.stream(conn, "")))
		lc.check()
	})
	t.Run("mismatch, in progress and replays", func(t *testing.T) {
		lc := &leakCheck{t: t}
		conn, srv := lc.serve(lc.engine(newKeyStore(t, "")))
		entered, release := make(chan struct{}), make(chan struct{})
		srv.unary = func(ctx context.Context, m string, in *structpb.Struct) (*structpb.Struct, error) {
			close(entered)
			<-release
			return srv.echo(ctx, m, in)
		}
		first := make(chan error, 1)
		go func() { first <- lc.unary(conn, "u", mustStruct(t, map[string]any{"a": 1})) }()
		<-entered
		assert.Equal(t, codes.Aborted, code(lc.unary(conn, "u", mustStruct(t, map[string]any{"a": 1}))))
		close(release)
		require.NoError(t, <-first)
		require.NoError(t, lc.unary(conn, "u", mustStruct(t, map[string]any{"a": 1})))
		assert.Equal(t, codes.FailedPrecondition, code(lc.unary(conn, "u", mustStruct(t, map[string]any{"a": 2}))))
		require.NoError(t, lc.stream(conn, "u"))
		assert.Equal(t, codes.AlreadyExists, code(lc.stream(conn, "u")))
		lc.check()
	})
	t.Run("lease lost", func(t *testing.T) {
		lc := &leakCheck{t: t}
		conn, srv := lc.serve(lc.engine(newKeyStore(t, "")),
			idemgrpc.WithEngineOptions(idemkit.WithLease(3*time.Millisecond), idemkit.WithoutHeartbeat()))
		entered, release := make(chan struct{}), make(chan struct{})
		var calls atomic.Int32
		srv.unary = func(ctx context.Context, m string, in *structpb.Struct) (*structpb.Struct, error) {
			if calls.Add(1) == 1 {
				close(entered)
				<-release // held past its lease, until a repeat took the key over
			}
			return srv.echo(ctx, m, in)
		}
		first := make(chan error, 1)
		go func() { first <- lc.unary(conn, "u", mustStruct(t, nil)) }()
		<-entered
		testkit.WaitFor(t, "the first call's lease to run out", func() bool {
			return code(lc.unary(conn, "u", mustStruct(t, nil))) != codes.Aborted
		})
		close(release)
		require.NoError(t, <-first, "the handler's own outcome")
		assert.EqualValues(t, 2, srv.runs.Load())
		assert.Contains(t, lc.log.String(), string(idemkit.EventLeaseLost))
		lc.check()
	})
	t.Run("missing and malformed keys", func(t *testing.T) {
		lc := &leakCheck{t: t}
		conn, _ := lc.serve(lc.engine(newKeyStore(t, "")))
		var hdr metadata.MD
		ctx := metadata.AppendToOutgoingContext(callCtx(t, "u", ""), "idempotency-key", secretKey, "idempotency-key", secretKey+"2")
		err := conn.Invoke(ctx, methodCreate, mustStruct(t, nil), new(structpb.Struct), grpc.Header(&hdr))
		assert.Equal(t, codes.InvalidArgument, code(err))
		lc.record(err, hdr)
		lc.check()
	})
}

// The engine is given the principal as its scope and the keys of the store
// hold digests only: listing the store reveals neither callers nor keys.
func TestStoreKeysHoldNoPrincipalOrKey(t *testing.T) {
	lc := &leakCheck{t: t}
	ks := newKeyStore(t, "")
	conn, srv := lc.serve(lc.engine(ks))
	require.NoError(t, lc.unary(conn, "u", mustStruct(t, nil)))
	require.NoError(t, lc.unary(conn, "u", mustStruct(t, nil)))
	require.NoError(t, lc.stream(conn, "u"))
	assert.EqualValues(t, 2, srv.runs.Load())
	keys := ks.recorded()
	require.NotEmpty(t, keys)
	for _, k := range keys {
		assert.NotContains(t, k, secretKey)
		assert.NotContains(t, k, secretPrincipal)
	}
}

// The principal is the engine's scope: every store key of one caller has
// that caller's scope segment, and another caller's keys another.
func TestPrincipalIsTheEngineScope(t *testing.T) {
	ks := newKeyStore(t, "")
	e, err := idemkit.New(ks, idemkit.WithObserver(nil))
	require.NoError(t, err)
	conn := serveIdem(t, e, &orders{})
	scopes := map[string]string{}
	for _, user := range []string{"alice", "bob"} {
		before := len(ks.recorded())
		require.NoError(t, create(callCtx(t, user, "k"), conn, mustStruct(t, nil)).err)
		_, err := watch(callCtx(t, user, "k"), conn, methodWatch, mustStruct(t, nil))
		require.NoError(t, err)
		for _, k := range ks.recorded()[before:] {
			scope := idemkit.ScopeOf(k)
			require.NotContains(t, []string{"", "-"}, scope, "key %s has a scope", k)
			if scopes[user] == "" {
				scopes[user] = scope
			}
			assert.Equal(t, scopes[user], scope, "one scope per principal")
		}
	}
	assert.NotEqual(t, scopes["alice"], scopes["bob"])
}

// An empty principal is no principal: the call is refused rather than
// share one scope with every other caller whose principal is empty.
func TestEmptyPrincipalIsUnauthenticated(t *testing.T) {
	srv := &orders{}
	s := newServer(t, testkit.NewEngine(t), idemgrpc.WithMethods(methodCreate, methodWatch),
		idemgrpc.WithPrincipal(func(context.Context) (string, error) { return "", nil }))
	conn := serve(t, srv, []grpc.ServerOption{
		grpc.UnaryInterceptor(s.UnaryServerInterceptor()),
		grpc.StreamInterceptor(s.StreamServerInterceptor()),
	})
	assert.Equal(t, codes.Unauthenticated, code(create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil)).err))
	_, err := watch(callCtx(t, "alice", "k"), conn, methodWatch, mustStruct(t, nil))
	assert.Equal(t, codes.Unauthenticated, code(err))
	assert.Zero(t, srv.runs.Load())
}

// Keys are namespaced "grpc" and hold the method: a record another caller
// of the engine made under the call's bare key, in the same scope, is not
// the call's.
func TestKeysDoNotMeetOtherCallersOfTheEngine(t *testing.T) {
	e := testkit.NewEngine(t)
	for _, key := range []string{"k", methodCreate + ":k"} {
		_, err := e.Do(context.Background(), key, "", func(context.Context) ([]byte, error) { return []byte("other"), nil },
			idemkit.WithScope("alice"))
		require.NoError(t, err)
	}
	srv := &orders{}
	r := create(callCtx(t, "alice", "k"), serveIdem(t, e, srv), mustStruct(t, nil))
	require.NoError(t, r.err)
	assert.False(t, r.replayed)
	assert.EqualValues(t, 1, srv.runs.Load())
}
