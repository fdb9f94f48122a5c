package delivery

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
)

// An effect that runs steps resumes on redelivery where its first
// delivery stopped: a batch of one or a single delivery alike, the step
// that finished does not run again.
func TestRedeliveryResumesAfterTheLastStep(t *testing.T) {
	for name, deliver := range map[string]func(p *Processor, r Request) Verdict{
		"one": func(p *Processor, r Request) Verdict { return p.One(context.Background(), r) },
		"batch": func(p *Processor, r Request) Verdict {
			var v Verdict
			p.Batch(context.Background(), []Request{r}, func(_ int, got Verdict) { v = got })
			return v
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := newProcessor(t, testkit.NewMem(t), Config{})
			var reserved, charged atomic.Int64
			var failCharge atomic.Bool
			failCharge.Store(true)
			run := func(ctx context.Context) ([]byte, error) {
				if _, err := idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) {
					reserved.Add(1)
					return nil, nil
				}); err != nil {
					return nil, err
				}
				return idemkit.Step(ctx, "charge", func(context.Context) ([]byte, error) {
					charged.Add(1)
					if failCharge.Load() {
						return nil, errors.New("provider down")
					}
					return []byte("charged"), nil
				})
			}
			if v := deliver(p, Request{Key: "m1", Run: run}); v.Action != Retry {
				t.Fatalf("first delivery: %+v, want a retry", v)
			}
			failCharge.Store(false)
			if v := deliver(p, Request{Key: "m1", Attempt: 2, Run: run}); v.Action != Ack || !v.Ran || v.Err != nil {
				t.Fatalf("redelivery: %+v, want a run and an ack", v)
			}
			if reserved.Load() != 1 || charged.Load() != 2 {
				t.Fatalf("reserve ran %d times, charge %d; want 1 and 2", reserved.Load(), charged.Load())
			}
		})
	}
}
