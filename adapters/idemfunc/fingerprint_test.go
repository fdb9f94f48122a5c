package idemfunc_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfunc"
	"github.com/idemkit/idemkit/internal/testkit"
)

// With the JSON fingerprint, one key given a different payload is refused
// as a mismatch.
func TestJSONFingerprintRefusesAnotherPayload(t *testing.T) {
	e := testkit.NewEngine(t)
	fn := func(context.Context, msg) (int, error) { return 1, nil }
	h := wrap(t, e, "handle", fn, idemfunc.WithJSONFingerprint[msg]())
	_, _, err := h(context.Background(), msg{ID: "x", Body: "a"})
	require.NoError(t, err)
	_, _, err = h(context.Background(), msg{ID: "x", Body: "b"})
	require.ErrorIs(t, err, idemkit.ErrMismatch)
}

// The JSON fingerprint compares the whole payload: no field is dropped as
// volatile, whatever its name.
func TestJSONFingerprintComparesEveryField(t *testing.T) {
	type payment struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
		Sign   string `json:"sign"`
	}
	fn := func(context.Context, payment) (int, error) { return 1, nil }
	h, err := idemfunc.Wrap(testkit.NewEngine(t), "pay", func(p payment) (string, error) { return p.ID, nil }, fn, idemfunc.WithJSONFingerprint[payment]())
	require.NoError(t, err)
	_, _, err = h(context.Background(), payment{ID: "p", Amount: 100, Sign: "+"})
	require.NoError(t, err)
	_, _, err = h(context.Background(), payment{ID: "p", Amount: 100, Sign: "-"})
	require.ErrorIs(t, err, idemkit.ErrMismatch)
}
