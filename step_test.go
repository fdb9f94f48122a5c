package idemkit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// order is a three-step operation: reserve, charge, mark paid. Each step
// counts its runs; charge fails while failCharge is set, and records the
// derived key and token it was given.
type order struct {
	reserve, charge, paid atomic.Int32
	failCharge            atomic.Bool
	mu                    sync.Mutex
	chargeKeys            []string
	chargeFences          []uint64
}

func (o *order) run(ctx context.Context) ([]byte, error) {
	if _, err := idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) {
		o.reserve.Add(1)
		return []byte("reserved"), nil
	}); err != nil {
		return nil, err
	}
	charged, err := idemkit.Step(ctx, "charge", func(ctx context.Context) ([]byte, error) {
		o.charge.Add(1)
		key, ok := idemkit.StepKey(ctx)
		if !ok {
			return nil, errors.New("no step key")
		}
		fence, _ := idemkit.FenceFromContext(ctx)
		o.mu.Lock()
		o.chargeKeys, o.chargeFences = append(o.chargeKeys, key), append(o.chargeFences, fence)
		o.mu.Unlock()
		if o.failCharge.Load() {
			return nil, errors.New("provider down")
		}
		return []byte("ch_1"), nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := idemkit.Step(ctx, "paid", func(context.Context) ([]byte, error) {
		o.paid.Add(1)
		return nil, nil
	}); err != nil {
		return nil, err
	}
	return append([]byte("order paid by "), charged...), nil
}

// A retry of an operation whose step failed replays the steps that
// finished and runs the failed one again, with the same derived key and
// a larger fencing token; once the operation completes, its result is
// replayed and no step runs.
func TestStepsRunOnceAcrossRetries(t *testing.T) {
	ctx := context.Background()
	e := testkit.NewEngine(t)
	o := &order{}
	o.failCharge.Store(true)
	_, err := e.Do(ctx, "order-1", "fp", o.run)
	require.EqualError(t, err, "provider down")

	o.failCharge.Store(false)
	res, err := e.Do(ctx, "order-1", "fp", o.run)
	require.NoError(t, err)
	assert.Equal(t, "order paid by ch_1", string(res.Value))
	res, err = e.Do(ctx, "order-1", "fp", o.run)
	require.NoError(t, err)
	assert.True(t, res.Replayed)

	assert.EqualValues(t, 1, o.reserve.Load(), "reserve ran again")
	assert.EqualValues(t, 2, o.charge.Load(), "the failed charge runs again, once")
	assert.EqualValues(t, 1, o.paid.Load())
	require.Len(t, o.chargeKeys, 2)
	assert.Equal(t, o.chargeKeys[0], o.chargeKeys[1], "the derived key is the same on every run")
	assert.Greater(t, o.chargeFences[1], o.chargeFences[0])
	assert.NotContains(t, o.chargeKeys[0], "order-1")

	other := &order{}
	_, err = e.Do(ctx, "order-2", "fp", other.run)
	require.NoError(t, err)
	assert.NotEqual(t, o.chargeKeys[0], other.chargeKeys[0], "another operation, another key")
}

// A run that crashed after a step (its lease ended, nobody completed it)
// is taken over by the retry, which skips the recorded step. Work under a
// claim from Begin runs steps through Claim.Context.
func TestStepsResumeAfterACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := testkit.NewEngine(t, idemkit.WithLease(30*time.Millisecond), idemkit.WithoutHeartbeat())
		o := &order{}
		c, _, err := e.Begin(ctx, "order-1", "fp")
		require.NoError(t, err)
		_, err = idemkit.Step(c.Context(ctx), "reserve", func(context.Context) ([]byte, error) {
			o.reserve.Add(1)
			return []byte("reserved"), nil
		})
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond) // the process died: its lease ends

		res, err := e.Do(ctx, "order-1", "fp", o.run)
		require.NoError(t, err)
		assert.Equal(t, "order paid by ch_1", string(res.Value))
		assert.EqualValues(t, 1, o.reserve.Load(), "the recorded step did not run again")
		assert.EqualValues(t, 1, o.charge.Load())
		assert.Greater(t, o.chargeFences[0], c.Fence())
		require.ErrorIs(t, c.Complete(ctx, nil), idemkit.ErrLeaseLost)
	})
}

// A run that lost its operation to another while its step ran gets the
// step result the other recorded, not its own.
func TestStepRecordedByTheNewOwnerStands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := testkit.NewEngine(t, idemkit.WithLease(30*time.Millisecond), idemkit.WithoutHeartbeat())
		c, _, err := e.Begin(ctx, "k", "fp")
		require.NoError(t, err)
		step := func(v string, wait time.Duration) func(context.Context) ([]byte, error) {
			return func(context.Context) ([]byte, error) { time.Sleep(wait); return []byte(v), nil }
		}
		var stale []byte
		var staleErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			stale, staleErr = idemkit.Step(c.Context(ctx), "charge", step("stale", 100*time.Millisecond))
		}()
		time.Sleep(50 * time.Millisecond)
		res, err := e.Do(ctx, "k", "fp", func(ctx context.Context) ([]byte, error) {
			return idemkit.Step(ctx, "charge", step("new", 0))
		})
		require.NoError(t, err)
		assert.Equal(t, "new", string(res.Value))
		<-done
		require.NoError(t, staleErr)
		assert.Equal(t, "new", string(stale), "the stale run gets the new owner's result")
	})
}

// Bad input gets a clear error and runs nothing.
func TestStepRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	ran := false
	fn := func(context.Context) ([]byte, error) { ran = true; return nil, nil }
	_, err := idemkit.Step(ctx, "reserve", fn)
	require.ErrorIs(t, err, idemkit.ErrNoOperation)
	_, ok := idemkit.StepKey(ctx)
	assert.False(t, ok)

	e := testkit.NewEngine(t)
	for name, bad := range map[string]string{
		"empty":   "",
		"long":    strings.Repeat("s", idemkit.MaxStepNameLen+1),
		"control": "a\nb",
		"utf-8":   "\xff",
	} {
		_, err := e.Do(ctx, "k-"+name, "", func(ctx context.Context) ([]byte, error) {
			return idemkit.Step(ctx, bad, fn)
		})
		require.ErrorIs(t, err, idemkit.ErrInvalid, name)
	}
	_, err = e.Do(ctx, "nil", "", func(ctx context.Context) ([]byte, error) { return idemkit.Step(ctx, "s", nil) })
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	assert.False(t, ran)

	other := func(context.Context) ([]byte, error) { return []byte("other"), nil }
	_, err = e.Do(ctx, "twice", "", func(ctx context.Context) ([]byte, error) {
		if _, err := idemkit.Step(ctx, "s", fn); err != nil {
			return nil, err
		}
		return idemkit.Step(ctx, "s", other)
	})
	require.ErrorIs(t, err, idemkit.ErrStepMismatch, "one name, two steps, one run")

	runs := 0
	res, err := e.Do(ctx, "loop", "", func(ctx context.Context) ([]byte, error) {
		var v []byte
		for range 3 { // one step called three times from one line: it runs once
			v, err = idemkit.Step(ctx, "s", func(context.Context) ([]byte, error) { runs++; return []byte("once"), nil })
			if err != nil {
				return nil, err
			}
		}
		return v, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "once", string(res.Value))
	assert.Equal(t, 1, runs)
}

// A step result over the size cap is not recorded: the step keeps a
// terminal record, and a retry gets ErrResultTooLarge without running it.
func TestStepResultTooLarge(t *testing.T) {
	ctx := context.Background()
	e := testkit.NewEngine(t, idemkit.WithMaxResultSize(4))
	var runs atomic.Int32
	big := func(context.Context) ([]byte, error) { runs.Add(1); return []byte("too large"), nil }
	fail := errors.New("stop after the step")
	op := func(ctx context.Context) ([]byte, error) {
		if _, err := idemkit.Step(ctx, "big", big); err != nil {
			return nil, err
		}
		return nil, fail
	}
	_, err := e.Do(ctx, "k", "", op)
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	_, err = e.Do(ctx, "k", "", op)
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	assert.EqualValues(t, 1, runs.Load())
}

// Many callers race for one operation with steps: each step runs once.
func TestStepsUnderARaceRunOnce(t *testing.T) {
	ctx := context.Background()
	e := testkit.NewEngine(t, idemkit.WithWait(time.Millisecond))
	o := &order{}
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			res, err := e.Do(ctx, "order-1", "fp", o.run)
			assert.NoError(t, err)
			assert.Equal(t, "order paid by ch_1", string(res.Value))
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, o.reserve.Load())
	assert.EqualValues(t, 1, o.charge.Load())
	assert.EqualValues(t, 1, o.paid.Load())
}

// A step recorded through a transaction: committed, its record is the
// step's result and a retry does not run it; rolled back, nothing is
// recorded and the step runs again.
func TestRecordStepIn(t *testing.T) {
	ctx := context.Background()
	mem := testkit.NewMem(t)
	e := testkit.NewEngineOn(t, mem)
	rolledBack := testkit.NewMem(t) // a transaction whose writes are dropped
	var runs atomic.Int32
	commit := false
	op := func(ctx context.Context) ([]byte, error) {
		return idemkit.Step(ctx, "reserve", func(ctx context.Context) ([]byte, error) {
			runs.Add(1)
			tx := store.Store(rolledBack)
			if commit {
				tx = mem
			}
			if err := idemkit.RecordStepIn(ctx, tx, []byte("reserved")); err != nil {
				return nil, err
			}
			return []byte("reserved"), nil
		})
	}
	_, err := e.Do(ctx, "k", "", op)
	require.ErrorContains(t, err, "did not commit its record")
	commit = true
	res, err := e.Do(ctx, "k2", "", op)
	require.NoError(t, err)
	assert.Equal(t, "reserved", string(res.Value))
	_, err = e.Do(ctx, "k", "", op)
	require.NoError(t, err, "the rolled-back step runs again")
	assert.EqualValues(t, 3, runs.Load())

	require.ErrorIs(t, idemkit.RecordStepIn(ctx, mem, nil), idemkit.ErrNoOperation)
	_, err = e.Do(ctx, "k3", "", func(ctx context.Context) ([]byte, error) {
		return idemkit.Step(ctx, "s", func(ctx context.Context) ([]byte, error) {
			return nil, idemkit.RecordStepIn(ctx, nil, nil)
		})
	})
	require.ErrorIs(t, err, idemkit.ErrInvalid)
}

// The typed Do runs steps the same way: a retry skips the recorded ones.
func TestStepsThroughTheTypedDo(t *testing.T) {
	ctx := context.Background()
	e := testkit.NewEngine(t)
	type receipt struct{ Charge string }
	var reserved atomic.Int32
	fail := true
	op := func(ctx context.Context) (receipt, error) {
		if _, err := idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) { reserved.Add(1); return nil, nil }); err != nil {
			return receipt{}, err
		}
		if fail {
			return receipt{}, errors.New("provider down")
		}
		return receipt{Charge: "ch_1"}, nil
	}
	_, _, err := idemkit.Do(ctx, e, "order-1", "fp", op)
	require.EqualError(t, err, "provider down")
	fail = false
	r, _, err := idemkit.Do(ctx, e, "order-1", "fp", op)
	require.NoError(t, err)
	assert.Equal(t, "ch_1", r.Charge)
	assert.EqualValues(t, 1, reserved.Load())
}

// countGets counts the Gets of its store.
type countGets struct {
	store.Store
	gets atomic.Int32
}

func (c *countGets) Get(ctx context.Context, k string) (store.Entry, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, k)
}

// A run that began its operation reads no step record: none can exist. A
// retry that takes the operation over reads each step once; a step it
// already ended in the run is not read again. An operation forgotten (or
// reused with another payload) and run again begins a new lineage, so the
// steps of its earlier run are not replayed to it.
func TestStepReadsOnlyWhatAnEarlierRunCanHaveRecorded(t *testing.T) {
	ctx := context.Background()
	s := &countGets{Store: testkit.NewMem(t)}
	e := testkit.NewEngineOn(t, s)
	var runs atomic.Int32
	fail := true
	op := func(ctx context.Context) ([]byte, error) {
		for range 3 { // one step, called three times from one line
			if _, err := idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) { runs.Add(1); return []byte("r"), nil }); err != nil {
				return nil, err
			}
		}
		if fail {
			return nil, errors.New("later work failed")
		}
		return []byte("done"), nil
	}
	_, err := e.Do(ctx, "k", "fp", op)
	require.Error(t, err)
	assert.Zero(t, s.gets.Load(), "a run that began its operation read a step record")
	assert.EqualValues(t, 1, runs.Load())

	fail = false
	_, err = e.Do(ctx, "k", "fp", op)
	require.NoError(t, err)
	assert.EqualValues(t, 1, s.gets.Load(), "the retry reads its step once")
	assert.EqualValues(t, 1, runs.Load(), "and does not run it")

	forgotten, err := e.Forget(ctx, idemkit.ModeDo, "k")
	require.NoError(t, err)
	require.True(t, forgotten)
	_, err = e.Do(ctx, "k", "fp", op)
	require.NoError(t, err)
	assert.EqualValues(t, 2, runs.Load(), "a forgotten operation runs its steps again")

	fail = true
	_, err = e.Do(ctx, "k2", "fp-1", op)
	require.Error(t, err)
	fail = false
	_, err = e.Do(ctx, "k2", "fp-2", op)
	require.NoError(t, err)
	assert.EqualValues(t, 4, runs.Load(), "another payload under a released key is another operation")
}
