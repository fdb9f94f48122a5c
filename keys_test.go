package idemkit_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// keyLog is a Store that remembers every key name it was given.
type keyLog struct {
	store.Store
	mu   sync.Mutex
	keys []string
}

func (k *keyLog) note(key string) {
	k.mu.Lock()
	k.keys = append(k.keys, key)
	k.mu.Unlock()
}

func (k *keyLog) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	k.note(key)
	return k.Store.SetNX(ctx, key, v, ttl)
}

func (k *keyLog) Get(ctx context.Context, key string) (store.Entry, error) {
	k.note(key)
	return k.Store.Get(ctx, key)
}

func (k *keyLog) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	k.note(key)
	return k.Store.CompareAndSwap(ctx, key, old, v, ttl)
}

// exercise runs every mode once with secret-looking parts and returns the
// store key names used.
func exercise(t *testing.T, opts ...idemkit.Option) (keys []string, token string) {
	t.Helper()
	mem := testkit.NewMem(t)
	log := &keyLog{Store: mem}
	e, err := idemkit.New(log, append([]idemkit.Option{idemkit.WithObserver(nil)}, opts...)...)
	require.NoError(t, err)
	ctx := context.Background()
	scope := idemkit.WithScope("alice@example.com")
	ok := func(context.Context) ([]byte, error) { return []byte("ok"), nil }
	_, err = e.Do(ctx, "pay-SECRETKEY", "fp", ok, scope)
	require.NoError(t, err)
	require.NoError(t, e.Guard(ctx, "fingerprint-SECRETKEY", func(context.Context) error { return nil }, scope))
	tok, err := e.IssueToken(ctx, "alice@example.com")
	require.NoError(t, err)
	_, err = e.UseToken(ctx, "alice@example.com", tok.Value, ok)
	require.NoError(t, err)
	return log.keys, tok.Value
}

func TestStoreKeysHoldNoCallerText(t *testing.T) {
	keys, token := exercise(t)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		for _, secret := range []string{"SECRETKEY", "alice", token} {
			assert.NotContains(t, k, secret, "store key %q", k)
		}
		assert.LessOrEqual(t, len(k), 80, "store key %q", k)
	}
}

func TestReadableKeysKeepCallerText(t *testing.T) {
	keys, token := exercise(t, idemkit.WithReadableKeys())
	joined := strings.Join(keys, "\n")
	for _, part := range []string{"pay-SECRETKEY", "alice@example.com", token} {
		assert.Contains(t, joined, part)
	}
}

func TestScopesNeverMeet(t *testing.T) {
	e := testkit.NewEngine(t)
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return []byte("r"), nil }
	for _, scope := range []string{"alice", "bob", "alice:x", "alice\x00"} {
		res, err := e.Do(ctx, "order-1", "", fn, idemkit.WithScope(scope))
		require.NoError(t, err)
		assert.False(t, res.Replayed, scope)
	}
	res, err := e.Do(ctx, "order-1", "", fn) // no scope is a scope of its own
	require.NoError(t, err)
	assert.False(t, res.Replayed)
	res, err = e.Do(ctx, "order-1", "", fn, idemkit.WithScope("bob"))
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, 5, runs)
}

func TestScopeOf(t *testing.T) {
	for _, readable := range []bool{false, true} {
		var opts []idemkit.Option
		if readable {
			opts = append(opts, idemkit.WithReadableKeys())
		}
		e := testkit.NewEngine(t, opts...)
		alice := idemkit.ScopeOf(idemkit.StoreKey(e, idemkit.ModeDo, "alice", "k1"))
		require.NotEmpty(t, alice)
		assert.NotContains(t, alice, ":")
		for _, mode := range []idemkit.Mode{idemkit.ModeGuard, idemkit.ModeDo, idemkit.ModeToken} {
			for _, key := range []string{"k2", "a:b:c", strings.Repeat("x", 600)} {
				assert.Equal(t, alice, idemkit.ScopeOf(idemkit.StoreKey(e, mode, "alice", key)), "mode %s key %q", mode, key)
			}
		}
		bob := idemkit.ScopeOf(idemkit.StoreKey(e, idemkit.ModeDo, "bob", "k1"))
		assert.NotEqual(t, alice, bob)
		assert.Equal(t, "-", idemkit.ScopeOf(idemkit.StoreKey(e, idemkit.ModeDo, "", "k1")))
	}
	for _, foreign := range []string{"", "plain", "a:b", "ns:long:x:y", "ns:i::y"} {
		assert.Empty(t, idemkit.ScopeOf(foreign), foreign)
	}
}

func TestWithScopeRejectsEmpty(t *testing.T) {
	e := testkit.NewEngine(t)
	_, err := e.Do(context.Background(), "k", "", func(context.Context) ([]byte, error) { return nil, nil }, idemkit.WithScope(""))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
}

// TestStoreKeysPinned pins store key names as stores hold them, for short
// and long scopes and keys (the names were computed apart, with Python's
// hashlib): a change here invalidates every record written before it.
func TestStoreKeysPinned(t *testing.T) {
	e := testkit.NewEngine(t)
	for _, c := range []struct {
		scope, key, want string
	}{
		{"", "http:k", "idem:i:-:IL51qGb6a3PtRKJ8ZlDsqg"},
		{"", strings.Repeat("k", 260), "idem:i:-:i1ZXlWOvL8AnZU44Yq-cOQ"},
		{"alice", "http:k", "idem:i:K9gGyX8OAK8a:nqMB-Ylnuc_v4DKlYgn6eA"},
		{strings.Repeat("s", 40), "http:k", "idem:i:OSP7g0jfd1Kb:hwj0AIo0Hl_s40f1mw9V7Q"},
		{strings.Repeat("s", 300), "http:k", "idem:i:KVXHMoxXyjnQ:b6aQN9VJo0fxugHtv0KwDA"},
		{"", strings.Repeat("k", 52), "idem:i:-:YbGKcfiFK29tUXykG9jAXg"}, // 55 bytes to hash: one block, as they are
		{"", strings.Repeat("k", 53), "idem:i:-:VsWFLVIw5ENbG6lDTMKrNQ"}, // 56: after the padded scope
	} {
		got := idemkit.StoreKey(e, idemkit.ModeDo, c.scope, c.key)
		assert.Equal(t, c.want, got, "scope %d, key %d bytes", len(c.scope), len(c.key))
		assert.LessOrEqual(t, len(got), 44, "a name Redis keeps as one embedded string")
	}
}

// TestStoreKeysUnderManyScopes composes names for more scopes than the
// engine remembers, from 8 goroutines at once, and checks each against
// the layout computed here with crypto/sha256 alone: a remembered scope
// that shares its slot with another, or is replaced while it is read,
// never gives another scope's name.
func TestStoreKeysUnderManyScopes(t *testing.T) {
	e := testkit.NewEngine(t)
	want := func(scope, key string) string {
		seg := "-"
		if scope != "" {
			s := sha256.Sum256([]byte(scope))
			seg = base64.RawURLEncoding.EncodeToString(s[:9])
		}
		in := binary.AppendUvarint([]byte("K\x02"), uint64(len(scope)))
		in = append(in, scope...)
		if len(in)+len(key) > 55 { // more than one block: the scope is padded to whole blocks
			in = append(in, make([]byte, (64-len(in)%64)%64)...)
		}
		sum := sha256.Sum256(append(in, key...))
		return "idem:i:" + seg + ":" + base64.RawURLEncoding.EncodeToString(sum[:16])
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				scope := ""
				if n := (i*7 + g) % 701; n > 0 {
					scope = fmt.Sprintf("user-%d", n)
				}
				key := fmt.Sprintf("http:k%d", i%13) + strings.Repeat("x", i%40) // both sides of one block
				if got, w := idemkit.StoreKey(e, idemkit.ModeDo, scope, key), want(scope, key); got != w {
					t.Errorf("scope %q key %q: %s, want %s", scope, key, got, w)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestStoreKeysWhenTheCallerReusesTheScopeMemory passes scopes that alias a
// buffer the caller then overwrites with the next principal, as a
// fasthttp handler's header strings do: each name must still be its own
// principal's, so the engine must not keep the caller's memory.
func TestStoreKeysWhenTheCallerReusesTheScopeMemory(t *testing.T) {
	e := testkit.NewEngine(t)
	ref := testkit.NewEngine(t)
	buf := make([]byte, len("tenant-00"))
	for i := range 50 {
		copy(buf, fmt.Sprintf("tenant-%02d", i))
		scope := unsafe.String(&buf[0], len(buf)) // aliases buf, as fasthttp's b2s does
		key := "http:" + strings.Repeat("k", 40)  // long enough for the saved hash state
		want := idemkit.StoreKey(ref, idemkit.ModeDo, fmt.Sprintf("tenant-%02d", i), key)
		if got := idemkit.StoreKey(e, idemkit.ModeDo, scope, key); got != want {
			t.Fatalf("principal %d got %s, want %s: an earlier principal's cached scope changed under the engine", i, got, want)
		}
	}
}

// TestTokenCallsRefuseWithScope: a token's principal is its scope, passed
// as an argument; WithScope given to IssueToken or UseToken is refused
// rather than ignored (ignored, a token issued under WithScope(alice) with
// an empty principal was usable by any caller).
func TestTokenCallsRefuseWithScope(t *testing.T) {
	e := testkit.NewEngine(t)
	ctx := context.Background()
	_, err := e.IssueToken(ctx, "", idemkit.WithScope("alice"))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	tok, err := e.IssueToken(ctx, "alice")
	require.NoError(t, err)
	ran := false
	_, err = e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { ran = true; return nil, nil }, idemkit.WithScope("bob"))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	require.False(t, ran)
}

// TestScopeWithOtherOptions: a scope given alone (which the engine applies
// without copying its config) and given among other options names the
// same key; the last scope given wins either way; a scoped call leaves the
// engine's unscoped calls unscoped; an option that changes nothing does not scope the call.
func TestScopeWithOtherOptions(t *testing.T) {
	e := testkit.NewEngine(t)
	view, err := e.With(idemkit.WithLease(time.Minute))
	require.NoError(t, err)
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return []byte("r"), nil }
	do := func(en *idemkit.Engine, opts ...idemkit.Option) bool {
		t.Helper()
		res, err := en.Do(ctx, "order-1", "", fn, opts...)
		require.NoError(t, err)
		return res.Replayed
	}
	assert.False(t, do(e, idemkit.WithScope("alice")))
	assert.True(t, do(e, idemkit.WithScope("alice"), idemkit.WithLease(time.Hour)))
	assert.True(t, do(e, idemkit.WithLease(time.Hour), idemkit.WithScope("alice")))
	assert.True(t, do(view, idemkit.WithScope("alice")))
	assert.True(t, do(e, idemkit.WithScope("bob"), idemkit.WithScope("alice")))
	assert.True(t, do(e, idemkit.WithScope("bob"), idemkit.WithLease(time.Hour), idemkit.WithScope("alice")))
	assert.True(t, do(e, idemkit.WithRetryHint(idemkit.DefaultRetryHint), idemkit.WithScope("alice")))
	assert.False(t, do(e, idemkit.WithScope("alice"), idemkit.WithScope("bob")))
	assert.False(t, do(e), "a scoped call left the engine scoped")
	assert.True(t, do(e, idemkit.WithRetryHint(idemkit.DefaultRetryHint)))
	assert.Equal(t, 3, runs)

	_, err = e.Do(ctx, "k", "", fn, idemkit.WithScope("alice"), idemkit.WithNamespace("other"))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	err = e.Guard(ctx, "k", func(context.Context) error { return nil }, idemkit.WithScope("alice"), idemkit.WithLease(time.Minute))
	require.ErrorIs(t, err, idemkit.ErrInvalid, "a mode-specific option beside a scope is still refused")
	_, err = e.With(idemkit.WithScope("alice"))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	_, err = idemkit.New(testkit.NewMem(t), idemkit.WithScope("alice"))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
}

// TestScopedReplayAllocatesNoConfig: a call whose only option is its scope
// allocates what an unscoped call does.
func TestScopedReplayAllocatesNoConfig(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocations")
	}
	e := testkit.NewEngine(t)
	ctx := context.Background()
	fn := func(context.Context) ([]byte, error) { return []byte("r"), nil }
	scoped := []idemkit.Option{idemkit.WithScope("alice")}
	_, err := e.Do(ctx, "k", "", fn, scoped...)
	require.NoError(t, err)
	_, err = e.Do(ctx, "k", "", fn)
	require.NoError(t, err)
	plain := testing.AllocsPerRun(200, func() { _, _ = e.Do(ctx, "k", "", fn) })
	withScope := testing.AllocsPerRun(200, func() { _, _ = e.Do(ctx, "k", "", fn, scoped...) })
	assert.Equal(t, plain, withScope)
}
