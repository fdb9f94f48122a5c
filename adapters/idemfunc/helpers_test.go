package idemfunc_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfunc"
)

type msg struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

func byID(m msg) (string, error) { return m.ID, nil }

// wrap is Wrap failing the test on a configuration error.
func wrap[Resp any](t *testing.T, e *idemkit.Engine, name string, fn idemfunc.Func[msg, Resp], opts ...idemfunc.Option[msg]) idemfunc.Idempotent[msg, Resp] {
	t.Helper()
	h, err := idemfunc.Wrap(e, name, byID, fn, opts...)
	require.NoError(t, err)
	return h
}
