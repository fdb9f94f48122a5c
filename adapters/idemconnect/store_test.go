package idemconnect_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/store/storetest"
)

func TestStoreDownFailClosed(t *testing.T) {
	e, err := idemkit.New(storetest.Unavailable(), idemkit.WithObserver(nil))
	require.NoError(t, err)
	srv := &orders{}
	base, hc := serveIdem(t, e, srv)
	r := call(callCtx(t), newClient(base, hc, procCreate), request(t, "alice", "k", nil))
	assert.Equal(t, connect.CodeUnavailable, connect.CodeOf(r.err), r.err)
	assert.NotContains(t, r.err.Error(), storetest.ErrDown.Error(), "store details stay on the server")

	_, err = watch(callCtx(t), t, newClient(base, hc, procWatch), "alice", "k")
	assert.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), err)
	assert.Zero(t, srv.runs.Load())
}

func TestStoreDownFailOpen(t *testing.T) {
	e, err := idemkit.New(storetest.Unavailable(), idemkit.WithObserver(nil))
	require.NoError(t, err)
	srv := &orders{}
	base, hc := serveIdem(t, e, srv, idemconnect.WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen)))
	for range 2 {
		r := call(callCtx(t), newClient(base, hc, procCreate), request(t, "alice", "k", map[string]any{"a": "b"}))
		require.NoError(t, r.err)
		assert.False(t, r.replayed)
		assert.Equal(t, "b", r.resp.Msg.GetFields()["a"].GetStringValue())
	}
	assert.EqualValues(t, 2, srv.runs.Load(), "unguarded: every call runs")
}
