package idemconnect_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/storetest"
)

// No error a client gets holds the idempotency key, the principal or the
// text of the principal function's error, in its message, details or
// metadata.
func TestErrorsHoldNoSecret(t *testing.T) {
	const key, principal, credential = "key-SECRET-1234", "principal-SECRET-5678", "token-SECRET-9012"
	secrets := []string{key, principal, credential}
	principalFn := func(_ context.Context, h http.Header) (string, error) {
		if h.Get("Authorization") == credential {
			return principal, nil
		}
		return "", errors.New("bad credential " + h.Get("Authorization"))
	}
	check := func(t *testing.T, what string, err error) {
		t.Helper()
		require.Error(t, err, what)
		var ce *connect.Error
		require.ErrorAs(t, err, &ce)
		text := ce.Error()
		for _, d := range ce.Details() {
			text += d.Type() + string(d.Bytes())
		}
		for name, vs := range ce.Meta() {
			text += name + strings.Join(vs, ",")
		}
		for _, s := range secrets {
			assert.NotContains(t, text, s, what)
		}
	}
	// A call with "hold" waits on the gate of its protocol's subtest.
	type gate struct{ entered, release chan struct{} }
	var mu sync.Mutex
	gates := map[string]gate{}
	gateOf := func(name string) gate {
		mu.Lock()
		defer mu.Unlock()
		g, ok := gates[name]
		if !ok {
			g = gate{make(chan struct{}), make(chan struct{})}
			gates[name] = g
		}
		return g
	}
	srv := &orders{}
	srv.unary = func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		if h := req.Msg.GetFields()["hold"]; h != nil {
			g := gateOf(h.GetStringValue())
			close(g.entered)
			<-g.release
		}
		return srv.echo(ctx, req)
	}
	idem, err := idemconnect.NewServer(testkit.NewEngine(t), idemconnect.WithProcedure[structpb.Struct](procCreate),
		idemconnect.WithPrincipal(principalFn), idemconnect.WithEngineOptions(idemkit.WithMaxResultSize(64)))
	require.NoError(t, err)
	down, err := idemkit.New(storetest.Unavailable(), idemkit.WithObserver(nil))
	require.NoError(t, err)
	downIdem, err := idemconnect.NewServer(down, idemconnect.WithProcedure[structpb.Struct](procCreate), idemconnect.WithPrincipal(principalFn))
	require.NoError(t, err)

	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		base, hc := serve(t, srv, idem)
		c := newClient(base, hc, procCreate, opts...)
		send := func(k, cred string, fields map[string]any) error {
			req := request(t, "", k, fields)
			req.Header().Set("Authorization", cred)
			return call(callCtx(t), c, req).err
		}
		k := key + "-" + t.Name()
		check(t, "unauthenticated", send(k, credential+"x", nil))
		require.NoError(t, send(k, credential, map[string]any{"a": 1}))
		check(t, "mismatch", send(k, credential, map[string]any{"a": 2}))
		require.NoError(t, send(k+"-big", credential, map[string]any{"blob": strings.Repeat("x", 200)}))
		check(t, "oversized", send(k+"-big", credential, map[string]any{"blob": strings.Repeat("x", 200)}))

		done := make(chan error, 1)
		g := gateOf(t.Name())
		go func() { done <- send(k+"-held", credential, map[string]any{"hold": t.Name()}) }()
		<-g.entered
		check(t, "in progress", send(k+"-held", credential, map[string]any{"hold": t.Name()}))
		close(g.release)
		require.NoError(t, <-done)

		base, hc = serve(t, srv, downIdem)
		c = newClient(base, hc, procCreate, opts...)
		check(t, "store down", send(k, credential, nil))
	})
}
