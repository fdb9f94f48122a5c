package idemfunc_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfunc"
	"github.com/idemkit/idemkit/internal/testkit"
)

// Many deliveries of one message at once run fn once; every other caller
// is told it got a replay.
func TestRedeliveryRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		h := wrap(t, testkit.NewEngine(t), "handle", func(_ context.Context, m msg) (string, error) {
			runs.Add(1)
			time.Sleep(2 * time.Millisecond)
			return "handled " + m.Body, nil
		}, idemfunc.WithEngineOptions[msg](idemkit.WithWait(time.Millisecond)))
		var fresh atomic.Int32
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				got, res, err := h(context.Background(), msg{ID: "m-1", Body: "hello"})
				assert.NoError(t, err)
				assert.Equal(t, "handled hello", got)
				if !res.Replayed {
					fresh.Add(1)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, 1, runs.Load())
		assert.EqualValues(t, 1, fresh.Load(), "every other call is told it got a replay")
	})
}
