package idemkit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// The principals and keys a deployment writes in the brute-force tests:
// guessable, as real ones often are.
var (
	guessablePrincipals = []string{"alice", "bob@example.com", "42"}
	guessableKeys       = []string{"order-1", "http:order-17", "7"}
)

// guessList is an attacker's candidate list: first names, their e-mail
// addresses, integers and order numbers.
func guessList() []string {
	names := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
		"mallory", "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "zoe"}
	c := slices.Clone(names)
	for _, n := range names {
		c = append(c, n+"@example.com")
	}
	for i := range 2000 {
		c = append(c, strconv.Itoa(i))
	}
	for i := range 100 {
		c = append(c, "order-"+strconv.Itoa(i))
	}
	return c
}

// exposure is what an attacker sees of a deployment: the store's key
// names (Redis SCAN, SELECT idem_key), its values, and the key digests in
// its logs.
type exposure struct {
	names  []string
	values [][]byte
	logs   []string
}

// expose runs every mode of an engine built with opts over guessable
// principals and keys, as an HTTP service with a payload window does (the
// fingerprint of a payload record is the SHA-256 of the key), and returns
// what it leaves for an attacker.
func expose(t *testing.T, opts ...idemkit.Option) exposure {
	t.Helper()
	var x exposure
	var mu sync.Mutex
	obs := idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		mu.Lock()
		x.logs = append(x.logs, ev.KeyDigest())
		mu.Unlock()
	})
	mem := testkit.NewMem(t)
	e, err := idemkit.New(mem, append([]idemkit.Option{idemkit.WithObserver(obs)}, opts...)...)
	require.NoError(t, err)
	ctx := context.Background()
	for _, p := range guessablePrincipals {
		for _, k := range guessableKeys {
			sum := sha256.Sum256([]byte(k))
			_, err := e.Do(ctx, k, hex.EncodeToString(sum[:]), func(context.Context) ([]byte, error) { return []byte("ok"), nil }, idemkit.WithScope(p))
			require.NoError(t, err)
			require.NoError(t, e.Guard(ctx, k, func(context.Context) error { return nil }, idemkit.WithScope(p)))
		}
		_, err := e.IssueToken(ctx, p)
		require.NoError(t, err)
	}
	_, err = e.Do(ctx, "order-1", "", func(context.Context) ([]byte, error) { return nil, nil })
	require.NoError(t, err)
	require.NoError(t, mem.Scan(ctx, "", func(name string, ent store.Entry) bool {
		x.names = append(x.names, name)
		x.values = append(x.values, bytes.Clone(ent.Value))
		return true
	}))
	return x
}

// cracked is what guessing recovered, by where it was found.
type cracked struct{ names, values, logs map[string]bool }

// crack brute-forces x with plain SHA-256 over the candidate list, in the
// layout the engine uses without a secret and in the one it used before
// (a log digest of the bare key), and returns the principals and keys it
// recovered.
func crack(x exposure, cands []string) cracked {
	r := cracked{names: map[string]bool{}, values: map[string]bool{}, logs: map[string]bool{}}
	found := r.names
	keys := slices.Clone(cands)
	for _, c := range cands {
		keys = append(keys, "http:"+c) // idemhttp's keys
	}
	// Scope segments: base64url of 72 bits of SHA-256(scope).
	scopeOf := map[string]string{}
	for _, c := range cands {
		s := sha256.Sum256([]byte(c))
		scopeOf[base64.RawURLEncoding.EncodeToString(s[:9])] = c
	}
	scopes := map[string]bool{"": true}
	for _, n := range x.names {
		parts := strings.Split(n, ":")
		if len(parts) != 4 {
			continue
		}
		if p, ok := scopeOf[parts[2]]; ok {
			found[p], scopes[p] = true, true
		}
	}
	// Key segments: 128 bits of SHA-256 of domain, scope length, scope and
	// key (the scope padded to whole blocks when it does not fit one).
	for scope := range scopes {
		keyOf := map[string]string{}
		for _, k := range keys {
			keyOf[unkeyedKeyDigest(scope, k)] = k
		}
		for _, n := range x.names {
			parts := strings.Split(n, ":")
			if len(parts) == 4 {
				if k, ok := keyOf[parts[3]]; ok {
					found[k] = true
				}
			}
		}
	}
	// Values: a payload record's fingerprint is the hex SHA-256 of a key.
	found = r.values
	fpOf := map[string]string{}
	for _, k := range keys {
		s := sha256.Sum256([]byte(k))
		fpOf[hex.EncodeToString(s[:])] = k
	}
	hexRun := regexp.MustCompile(`[0-9a-f]{64}`)
	for _, v := range x.values {
		for _, m := range hexRun.FindAll(v, -1) {
			if k, ok := fpOf[string(m)]; ok {
				found[k] = true
			}
		}
	}
	// Log digests: 48 bits of SHA-256 of domain, scope length, scope and
	// key; and of the bare key, as before.
	found = r.logs
	for _, d := range x.logs {
		if sk, ok := logDictionary(cands, keys)[d]; ok {
			scope, k, _ := strings.Cut(sk, "/")
			if k == "" {
				k = scope
			} else if scope != "" {
				found[scope] = true
			}
			found[k] = true
		}
	}
	return r
}

// logDictionary maps log digests of guessed scopes and keys to them,
// built once: it is the costliest part of the attack.
var logDictionary = func() func(cands, keys []string) map[string]string {
	var once sync.Once
	var m map[string]string
	return func(cands, keys []string) map[string]string {
		once.Do(func() { m = buildLogDictionary(cands, keys) })
		return m
	}
}()

func buildLogDictionary(cands, keys []string) map[string]string {
	logOf := map[string]string{}
	logScopes := []string{""}
	for _, c := range cands {
		if !strings.HasPrefix(c, "order-") && len(c) <= 16 && (c[0] < '0' || c[0] > '9' || len(c) <= 2 && c < "5") {
			logScopes = append(logScopes, c) // names, e-mails and small integers
		}
	}
	for _, k := range keys {
		s := sha256.Sum256([]byte(k))
		logOf[hex.EncodeToString(s[:6])] = k
		for _, scope := range logScopes {
			in := binary.AppendUvarint([]byte("L\x01"), uint64(len(scope)))
			s := sha256.Sum256(append(append(in, scope...), k...))
			logOf[hex.EncodeToString(s[:6])] = scope + "/" + k
		}
	}
	return logOf
}

// unkeyedKeyDigest is the key segment the engine writes without a secret.
func unkeyedKeyDigest(scope, key string) string {
	head := binary.AppendUvarint([]byte("K\x02"), uint64(len(scope)))
	head = append(head, scope...)
	if len(head)+len(key) > 55 {
		head = append(head, make([]byte, (64-len(head)%64)%64)...)
	}
	s := sha256.Sum256(append(head, key...))
	return base64.RawURLEncoding.EncodeToString(s[:16])
}

// TestKeySecretDefeatsGuessing writes guessable principals and keys
// through every mode, then brute-forces the store's key names, its values
// and the log digests with plain SHA-256 over a list of guesses. Without
// a secret every principal and key is recovered (the attack works);
// with WithKeySecret, none is.
func TestKeySecretDefeatsGuessing(t *testing.T) {
	cands := guessList()
	all := append(slices.Clone(guessablePrincipals), guessableKeys...)
	plain := crack(expose(t), cands)
	assert.ElementsMatch(t, all, sorted(plain.names), "without a secret, key names give away every principal and key")
	assert.ElementsMatch(t, guessableKeys, sorted(plain.values), "without a secret, stored fingerprints give away every key")
	assert.ElementsMatch(t, all, sorted(plain.logs), "without a secret, log digests give away every principal and key")

	keyed := crack(expose(t, idemkit.WithKeySecret([]byte("0123456789abcdef0123456789abcdef"))), cands)
	assert.Empty(t, keyed.names, "with a secret, key names give nothing away")
	assert.Empty(t, keyed.values, "with a secret, stored fingerprints give nothing away")
	assert.Empty(t, keyed.logs, "with a secret, log digests give nothing away")
}

func sorted(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// TestWithKeySecretValidation: an empty or short secret is refused, and
// so is a secret given to a view or a call; the engine keeps its own copy
// of the secret.
func TestWithKeySecretValidation(t *testing.T) {
	mem := testkit.NewMem(t)
	for _, s := range [][]byte{nil, {}, []byte("short"), testSecret[:idemkit.MinKeySecretLen-1]} {
		_, err := idemkit.New(mem, idemkit.WithKeySecret(s))
		require.ErrorIs(t, err, idemkit.ErrInvalid, "a %d-byte secret", len(s))
	}
	e, err := idemkit.New(mem, idemkit.WithObserver(nil), idemkit.WithKeySecret(testSecret))
	require.NoError(t, err)
	_, err = e.With(idemkit.WithKeySecret(testSecret))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	_, err = e.Do(context.Background(), "k", "", func(context.Context) ([]byte, error) { return nil, nil }, idemkit.WithKeySecret(testSecret))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	_, err = e.KeyDigest("k", idemkit.WithLease(time.Minute))
	require.ErrorIs(t, err, idemkit.ErrInvalid)

	buf := bytes.Clone(testSecret)
	mine, err := idemkit.New(mem, idemkit.WithKeySecret(buf))
	require.NoError(t, err)
	buf[0] ^= 0xff // the caller reuses its buffer
	assert.Equal(t, idemkit.StoreKey(e, idemkit.ModeDo, "alice", "k"), idemkit.StoreKey(mine, idemkit.ModeDo, "alice", "k"))
}

// TestKeySecretNames: engines with one secret name keys alike (instances
// of a service, idemctl); another secret, or none, names them otherwise;
// the scope segment is still one per scope (ScopeOf) and the name keeps
// its length.
func TestKeySecretNames(t *testing.T) {
	mem := testkit.NewMem(t)
	a := testkit.NewEngine(t, idemkit.WithKeySecret(testSecret))
	b, err := idemkit.New(mem, idemkit.WithKeySecret(bytes.Clone(testSecret)))
	require.NoError(t, err)
	other := testkit.NewEngine(t, idemkit.WithKeySecret(bytes.Repeat([]byte("x"), 40)))
	plain := testkit.NewEngine(t)
	for _, mode := range []idemkit.Mode{idemkit.ModeDo, idemkit.ModeGuard, idemkit.ModeToken} {
		for _, scope := range []string{"", "alice"} {
			for _, key := range []string{"order-1", "http:" + strings.Repeat("k", 80)} {
				n := idemkit.StoreKey(a, mode, scope, key)
				assert.Equal(t, n, idemkit.StoreKey(b, mode, scope, key))
				assert.NotEqual(t, n, idemkit.StoreKey(other, mode, scope, key))
				p := idemkit.StoreKey(plain, mode, scope, key)
				assert.NotEqual(t, n, p)
				assert.Len(t, n, len(p))
				assert.Equal(t, idemkit.ScopeOf(n), idemkit.ScopeOf(idemkit.StoreKey(a, mode, scope, "another")))
			}
		}
	}
	assert.Equal(t, "-", idemkit.ScopeOf(idemkit.StoreKey(a, idemkit.ModeDo, "", "k")))
}

// TestKeySecretLogDigest: the digest in events and error texts covers the
// scope and, with a secret, is keyed; (*Engine).KeyDigest gives the same
// digest for a key, so an operator can match a key to log lines.
func TestKeySecretLogDigest(t *testing.T) {
	ctx := context.Background()
	for _, opts := range [][]idemkit.Option{nil, {idemkit.WithKeySecret(testSecret)}} {
		var got []string
		obs := idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) { got = append(got, ev.KeyDigest()) })
		e := testkit.NewEngine(t, append([]idemkit.Option{idemkit.WithObserver(obs)}, opts...)...)
		_, err := e.Do(ctx, "order-1", "", func(context.Context) ([]byte, error) { return nil, nil }, idemkit.WithScope("alice"))
		require.NoError(t, err)
		want, err := e.KeyDigest("order-1", idemkit.WithScope("alice"))
		require.NoError(t, err)
		require.NotEmpty(t, got)
		for _, d := range got {
			assert.Equal(t, want, d)
		}
		bob, err := e.KeyDigest("order-1", idemkit.WithScope("bob"))
		require.NoError(t, err)
		assert.NotEqual(t, want, bob, "the digest covers the scope")
		_, err = e.Inspect(ctx, idemkit.ModeDo, "order-2", idemkit.WithScope("alice"))
		require.ErrorIs(t, err, store.ErrNotFound)
		d2, _ := e.KeyDigest("order-2", idemkit.WithScope("alice"))
		assert.Contains(t, err.Error(), d2, "error texts name the key by the same digest")
		unkeyed := idemkit.Event{Key: "order-1"}.KeyDigest()
		if opts != nil {
			assert.NotEqual(t, unkeyed, want)
		}
	}
}

// TestKeySecretModes: every mode works with a secret: a replay, a
// mismatch (the stored fingerprint is keyed), a Guard duplicate, a token
// used once, a batch, Inspect and Forget; and 32 racing callers at one key
// run the work once.
func TestKeySecretModes(t *testing.T) {
	ctx := context.Background()
	e := testkit.NewEngine(t, idemkit.WithKeySecret(testSecret))
	fn := func(context.Context) ([]byte, error) { return []byte("r"), nil }
	_, err := e.Do(ctx, "k", "fp", fn, idemkit.WithScope("alice"))
	require.NoError(t, err)
	res, err := e.Do(ctx, "k", "fp", fn, idemkit.WithScope("alice"))
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	_, err = e.Do(ctx, "k", "other", fn, idemkit.WithScope("alice"))
	require.ErrorIs(t, err, idemkit.ErrMismatch)
	out, err := e.BeginBatch(ctx, []idemkit.BatchRequest{{Key: "k", Fingerprint: "fp"}, {Key: "k", Fingerprint: "other"}, {Key: "b", Fingerprint: "fp"}}, idemkit.WithScope("alice"))
	require.NoError(t, err)
	assert.True(t, out[0].Result.Replayed)
	require.ErrorIs(t, out[1].Err, idemkit.ErrMismatch)
	require.NotNil(t, out[2].Claim)
	require.NoError(t, out[2].Claim.Complete(ctx, []byte("b")))
	c, _, err := e.Begin(ctx, "b", "fp", idemkit.WithScope("alice"))
	require.NoError(t, err)
	assert.Nil(t, c)

	info, err := e.Inspect(ctx, idemkit.ModeDo, "k", idemkit.WithScope("alice"))
	require.NoError(t, err)
	assert.Equal(t, idemkit.StateCompleted, info.State)
	assert.NotEmpty(t, info.FingerprintDigest)
	ok, err := e.Forget(ctx, idemkit.ModeDo, "k", idemkit.WithScope("alice"))
	require.NoError(t, err)
	assert.True(t, ok)

	require.NoError(t, e.Guard(ctx, "g", func(context.Context) error { return nil }))
	require.ErrorIs(t, e.Guard(ctx, "g", func(context.Context) error { return nil }), idemkit.ErrDuplicate)
	tok, err := e.IssueToken(ctx, "alice")
	require.NoError(t, err)
	_, err = e.UseToken(ctx, "alice", tok.Value, fn)
	require.NoError(t, err)
	res, err = e.UseToken(ctx, "alice", tok.Value, fn)
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	_, err = e.UseToken(ctx, "bob", tok.Value, fn)
	require.ErrorIs(t, err, idemkit.ErrTokenInvalid)

	var runs atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			_, _ = e.Do(ctx, "race", "fp", func(context.Context) ([]byte, error) { runs.Add(1); return []byte("x"), nil },
				idemkit.WithScope("alice"), idemkit.WithWait(time.Millisecond))
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), runs.Load())
}
