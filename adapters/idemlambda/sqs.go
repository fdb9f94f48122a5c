package idemlambda

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit"
)

// RecordHandler handles one SQS message of a batch.
type RecordHandler func(ctx context.Context, msg events.SQSMessage) error

// BatchHandler is what SQS returns: a handler of SQS batches that reports
// partial batch failures (the event source mapping's
// ReportBatchItemFailures).
type BatchHandler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// SQS returns a handler of SQS batches that runs fn once per message key,
// guarded by e under name. The key is the message ID by default (SQS keeps
// it across redeliveries); WithKeyPath or WithKeyFunc take a business key
// instead ("body.orderId", "attributes.MessageDeduplicationId"). The
// payload check covers the body (WithPayloadPaths sets others).
//
// Records run in order, each under its own claim. What the response
// reports, per record:
//   - fn succeeded, now or earlier (a duplicate): acknowledged, not in
//     BatchItemFailures. A duplicate does not run fn.
//   - fn failed: reported in BatchItemFailures, so SQS redelivers it after
//     its visibility timeout, and the key is released. fn's context
//     carries the claim, so a redelivered record resumes: the steps
//     (idemkit.Step) its first delivery recorded are skipped. An error the
//     engine's ErrorCodec marks final is recorded: its redelivery is
//     acknowledged without running fn (logged as a final failure).
//   - another delivery of the key is in progress, the store failed, the
//     record has no key, or its key was first seen with another payload:
//     reported failed, and logged (WithLogger), so it is retried and ends
//     in the queue's dead-letter queue rather than being lost.
//
// On a FIFO queue (an event source ARN ending in ".fifo") the records
// after a failed one are reported failed without running, as SQS needs to
// keep a message group's order. The lease of each claim is the time left
// before the invocation's deadline, so a record whose invocation timed
// out is free again when its redelivery comes (the visibility timeout is
// longer than the function's timeout).
func SQS(e *idemkit.Engine, name string, fn RecordHandler, opts ...Option) (BatchHandler, error) {
	byID := func(m events.SQSMessage) (string, error) { return m.MessageId, nil }
	g, err := newGuard(e, name, kind{call: "SQS", logger: true, defaultFP: []string{"body"}}, byID, opts)
	if err == nil && fn == nil {
		err = fmt.Errorf("idemlambda: SQS: %w: nil handler", idemkit.ErrInvalid)
	}
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		failed := false
		for _, msg := range ev.Records {
			if failed && strings.HasSuffix(msg.EventSourceARN, ".fifo") {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
				continue
			}
			if err := record(ctx, g, msg, fn); err != nil {
				failed = true
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
				g.cfg.logger.WarnContext(ctx, "idemlambda: SQS record failed; reported for redelivery",
					"handler", g.name, "message_id", msg.MessageId, "error", err)
			}
		}
		return resp, nil
	}, nil
}

// record handles one message: nil acknowledges it, an error reports it
// failed.
func record(ctx context.Context, g *guard[events.SQSMessage], msg events.SQSMessage, fn RecordHandler) error {
	if g.off {
		return fn(ctx, msg)
	}
	run := func(ctx context.Context, m events.SQSMessage) (struct{}, error) { return struct{}{}, fn(ctx, m) }
	_, res, err := invoke(ctx, g, msg, run)
	switch {
	case err == nil:
		return nil
	case res.Replayed:
		// A recorded final failure, or a result too large to keep: the
		// work ended before; running it again is what the key prevents.
		g.cfg.logger.InfoContext(ctx, "idemlambda: SQS record acknowledged: its key holds a final outcome",
			"handler", g.name, "message_id", msg.MessageId, "error", err)
		return nil
	case res.Value != nil && !errors.Is(err, idemkit.ErrResultTooLarge) && !res.Unguarded:
		// fn succeeded but its outcome was not recorded (lease lost, store
		// failed): acknowledged, since running it again is the duplicate.
		g.cfg.logger.WarnContext(ctx, "idemlambda: SQS record acknowledged without its outcome recorded",
			"handler", g.name, "message_id", msg.MessageId, "error", err)
		return nil
	case res.Value != nil:
		return nil // too large to keep (the key keeps a terminal record), or ran unguarded
	}
	return err
}
