package idemlambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
)

// effects counts a record handler's runs per order.
type effects struct {
	mu   sync.Mutex
	runs map[string]int
	fail map[string]bool // orders whose run fails
}

func newEffects() *effects { return &effects{runs: map[string]int{}, fail: map[string]bool{}} }

func (f *effects) handle(_ context.Context, m events.SQSMessage) error {
	var o order
	if err := json.Unmarshal([]byte(m.Body), &o); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[o.OrderID]++
	if f.fail[o.OrderID] {
		return errors.New("ledger unavailable")
	}
	return nil
}

func (f *effects) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[id]
}

func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// A redelivered batch is acknowledged whole without running the handler
// again: every record is a duplicate.
func TestSQSAcknowledgesDuplicates(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		f := newEffects()
		h, err := idemlambda.SQS(e, "ledger", f.handle)
		require.NoError(t, err)
		ev := load[events.SQSEvent](t, "sqs.json")
		for range 2 {
			resp, err := h(context.Background(), ev)
			require.NoError(t, err)
			require.Empty(t, resp.BatchItemFailures)
		}
		for _, id := range []string{"o-1", "o-2", "o-3"} {
			require.Equal(t, 1, f.count(id), id)
		}
	})
}

// A record whose work fails is reported in BatchItemFailures, the others
// are acknowledged; its redelivery runs it again, and only it.
func TestSQSReportsFailedRecords(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		f := newEffects()
		f.fail["o-2"] = true
		h, err := idemlambda.SQS(e, "ledger", f.handle, idemlambda.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		ev := load[events.SQSEvent](t, "sqs.json")
		resp, err := h(context.Background(), ev)
		require.NoError(t, err)
		require.Equal(t, []string{ev.Records[1].MessageId}, failedIDs(resp))

		f.fail["o-2"] = false
		resp, err = h(context.Background(), ev) // SQS redelivers o-2; the others are duplicates here
		require.NoError(t, err)
		require.Empty(t, resp.BatchItemFailures)
		require.Equal(t, map[string]int{"o-1": 1, "o-2": 2, "o-3": 1}, f.runs)
	})
}

// A redelivered record resumes: the steps its first delivery recorded
// are skipped, the one that failed runs again.
func TestSQSRedeliveryResumesSteps(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		var reserved, charged atomic.Int64
		chargeFails := true
		h, err := idemlambda.SQS(e, "orders", func(ctx context.Context, m events.SQSMessage) error {
			if _, err := idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) {
				reserved.Add(1)
				return []byte("held"), nil
			}); err != nil {
				return err
			}
			_, err := idemkit.Step(ctx, "charge", func(context.Context) ([]byte, error) {
				charged.Add(1)
				if chargeFails {
					return nil, errors.New("card network timeout")
				}
				return []byte("paid"), nil
			})
			return err
		}, idemlambda.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		ev := load[events.SQSEvent](t, "sqs.json")
		ev.Records = ev.Records[:1]
		resp, err := h(context.Background(), ev)
		require.NoError(t, err)
		require.Len(t, resp.BatchItemFailures, 1)
		chargeFails = false
		resp, err = h(context.Background(), ev)
		require.NoError(t, err)
		require.Empty(t, resp.BatchItemFailures)
		require.EqualValues(t, 1, reserved.Load(), "the recorded step is not run again")
		require.EqualValues(t, 2, charged.Load())
	})
}

// Records of one batch that share a business key run once.
func TestSQSBusinessKeyDuplicatesInOneBatch(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		f := newEffects()
		h, err := idemlambda.SQS(e, "ledger", f.handle, idemlambda.WithKeyPath("body.orderId"))
		require.NoError(t, err)
		ev := load[events.SQSEvent](t, "sqs.json")
		ev.Records[1].Body = ev.Records[0].Body // the producer sent o-1 twice
		resp, err := h(context.Background(), ev)
		require.NoError(t, err)
		require.Empty(t, resp.BatchItemFailures)
		require.Equal(t, map[string]int{"o-1": 1, "o-3": 1}, f.runs)
	})
}

// On a FIFO queue the records after a failed one are reported failed
// without running, keeping the message group's order.
func TestSQSFIFOStopsAtTheFirstFailure(t *testing.T) {
	e := engineOn(t, openers[0].open(t))
	f := newEffects()
	f.fail["o-2"] = true
	h, err := idemlambda.SQS(e, "ledger", f.handle, idemlambda.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	ev := load[events.SQSEvent](t, "sqs.json")
	for i := range ev.Records {
		ev.Records[i].EventSourceARN += ".fifo"
	}
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	require.Equal(t, []string{ev.Records[1].MessageId, ev.Records[2].MessageId}, failedIDs(resp))
	require.Equal(t, map[string]int{"o-1": 1, "o-2": 1}, f.runs)
}

// Concurrent invocations with one batch (SQS delivers a message twice at
// once) run each record once; what is in progress elsewhere is reported
// failed, for redelivery, never acknowledged unrun.
func TestSQSConcurrentBatches(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		const n = 16
		f := newEffects()
		h, err := idemlambda.SQS(e, "ledger", f.handle, idemlambda.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		ev := load[events.SQSEvent](t, "sqs.json")
		var acked [3]atomic.Int64
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				resp, err := h(context.Background(), ev)
				require.NoError(t, err)
				failed := map[string]bool{}
				for _, id := range failedIDs(resp) {
					failed[id] = true
				}
				for i, r := range ev.Records {
					if !failed[r.MessageId] {
						acked[i].Add(1)
					}
				}
			})
		}
		wg.Wait()
		for i, id := range []string{"o-1", "o-2", "o-3"} {
			require.Equal(t, 1, f.count(id), id)
			require.GreaterOrEqual(t, acked[i].Load(), int64(1), id)
		}
	})
}

// A record without the key path is reported failed (so it reaches the
// dead-letter queue, never lost) and logged with the path; the handler
// does not run.
func TestSQSRecordWithoutKey(t *testing.T) {
	e := engineOn(t, openers[0].open(t))
	f := newEffects()
	var logs bytes.Buffer
	h, err := idemlambda.SQS(e, "ledger", f.handle, idemlambda.WithKeyPath("body.customerId"),
		idemlambda.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	ev := load[events.SQSEvent](t, "sqs.json")
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 3)
	require.Empty(t, f.runs)
	require.Contains(t, logs.String(), `key path \"body.customerId\"`)
	require.Contains(t, logs.String(), ev.Records[0].MessageId)
}

// A message ID that comes back with another body is reported failed and
// logged as a mismatch, not acknowledged: the handler does not run.
func TestSQSMismatchIsReportedFailed(t *testing.T) {
	e := engineOn(t, openers[0].open(t))
	f := newEffects()
	var logs bytes.Buffer
	h, err := idemlambda.SQS(e, "ledger", f.handle, idemlambda.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	ev := load[events.SQSEvent](t, "sqs.json")
	ev.Records = ev.Records[:1]
	resp, err := h(context.Background(), ev)
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	ev.Records[0].Body = `{"orderId":"o-1","amount":11}`
	resp, err = h(context.Background(), ev)
	require.NoError(t, err)
	require.Equal(t, []string{ev.Records[0].MessageId}, failedIDs(resp))
	require.Contains(t, logs.String(), `payload paths [\"body\"] differ`)
	require.Equal(t, 1, f.count("o-1"))
}
