package idemnats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers of a dead-lettered copy (WithDeadLetter), besides the
// message's own.
const (
	// DeadLetterStreamHeader names the stream the message came from.
	DeadLetterStreamHeader = "Idemkit-Stream"
	// DeadLetterSequenceHeader is its stream sequence.
	DeadLetterSequenceHeader = "Idemkit-Sequence"
	// DeadLetterSubjectHeader is the subject it was published on.
	DeadLetterSubjectHeader = "Idemkit-Subject"
	// DeadLetterAttemptsHeader is the number of deliveries that failed.
	DeadLetterAttemptsHeader = "Idemkit-Attempts"
	// DeadLetterReasonHeader is "error" or "panic": how the last one
	// failed. The error itself is in the log, not in the copy.
	DeadLetterReasonHeader = "Idemkit-Reason"
	// DeadLetterMsgIDHeader keeps the message's own Nats-Msg-Id: the copy
	// gets one of its own, so a redelivered message dead-lettered twice
	// is deduplicated by the dead-letter stream.
	DeadLetterMsgIDHeader = "Idemkit-Msg-Id"
)

// deadLetter is where exhausted messages are published.
type deadLetter struct {
	js      jetstream.JetStream
	subject string
}

// WithDeadLetter publishes a copy of a message whose deliveries all
// failed (WithMaxAttempts) to subject, which a stream must capture, and
// terminates the message once the stream has stored the copy. The copy
// has the message's body and headers, and the DeadLetter*Header headers.
// If the copy cannot be published the message is nakked after the
// longest retry delay instead, and published again on its next delivery:
// it is never terminated without its copy.
//
// Without WithDeadLetter an exhausted message is terminated: the server
// stops delivering it to this consumer and publishes the
// $JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED advisory with its stream
// sequence. A limits-retention stream keeps the message; a work-queue or
// interest stream deletes it.
func WithDeadLetter(js jetstream.JetStream, subject string) Option {
	return func(c *config) error {
		if js == nil {
			return fmt.Errorf("WithDeadLetter(nil, %q): dead letter needs a JetStream context", subject)
		}
		if subject == "" {
			return errors.New(`WithDeadLetter(js, ""): dead letter needs a subject`)
		}
		c.deadLetter = &deadLetter{js: js, subject: subject}
		return nil
	}
}

// publish stores a dead-letter copy of msg, for the consumer name.
func (dl *deadLetter) publish(ctx context.Context, name string, msg jetstream.Msg, out Outcome) error {
	copied := nats.NewMsg(dl.subject)
	copied.Data = msg.Data()
	for k, vs := range msg.Headers() {
		copied.Header[k] = append([]string(nil), vs...)
	}
	if id := copied.Header.Get(jetstream.MsgIDHeader); id != "" {
		copied.Header.Set(DeadLetterMsgIDHeader, id)
	}
	copied.Header.Set(DeadLetterSubjectHeader, msg.Subject())
	copied.Header.Set(DeadLetterAttemptsHeader, strconv.Itoa(out.Attempt))
	reason := "error"
	if out.Panicked {
		reason = "panic"
	}
	copied.Header.Set(DeadLetterReasonHeader, reason)
	if md, err := msg.Metadata(); err == nil {
		copied.Header.Set(DeadLetterStreamHeader, md.Stream)
		copied.Header.Set(DeadLetterSequenceHeader, strconv.FormatUint(md.Sequence.Stream, 10))
		copied.Header.Set(jetstream.MsgIDHeader, name+":"+md.Stream+":"+strconv.FormatUint(md.Sequence.Stream, 10))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := dl.js.PublishMsg(ctx, copied); err != nil {
		return fmt.Errorf("idemnats: dead letter to %s: %w", dl.subject, err)
	}
	return nil
}
