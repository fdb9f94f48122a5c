package idemkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
)

func TestNewRejectsBadInput(t *testing.T) {
	_, err := idemkit.New(nil)
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	s := testkit.NewMem(t)
	for name, opt := range map[string]idemkit.Option{
		"zero window":        idemkit.WithWindow(0),
		"negative lease":     idemkit.WithLease(-time.Second),
		"bad namespace":      idemkit.WithNamespace("a:b"),
		"empty namespace":    idemkit.WithNamespace(""),
		"bad release":        idemkit.WithRelease(idemkit.Release(9)),
		"bad failure mode":   idemkit.WithFailureMode(idemkit.FailureMode(7)),
		"zero result cap":    idemkit.WithMaxResultSize(0),
		"negative poll":      idemkit.WithWait(-time.Millisecond),
		"nil codec":          idemkit.WithCodec(nil),
		"zero heartbeat":     idemkit.WithHeartbeat(0),
		"zero token TTL":     idemkit.WithTokenTTL(0),
		"negative retryhint": idemkit.WithRetryHint(-1),
	} {
		_, err := idemkit.New(s, opt)
		assert.ErrorIs(t, err, idemkit.ErrInvalid, name)
	}
	e := testkit.NewEngine(t)
	err = e.Guard(context.Background(), "k", func(context.Context) error { return nil }, idemkit.WithNamespace("other"))
	assert.ErrorIs(t, err, idemkit.ErrInvalid, "namespace per call")
	err = e.Guard(context.Background(), "", func(context.Context) error { return nil })
	assert.ErrorIs(t, err, idemkit.ErrInvalid, "empty key")
	_, err = e.Do(context.Background(), "", "", func(context.Context) ([]byte, error) { return nil, nil })
	assert.ErrorIs(t, err, idemkit.ErrInvalid, "empty key")
}
