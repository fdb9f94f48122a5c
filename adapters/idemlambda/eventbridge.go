package idemlambda

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit"
)

// EventBridge is Wrap for EventBridge events, keyed by the event's id
// unless WithKeyPath or WithKeyFunc says otherwise: EventBridge delivers
// an event at least once, and every delivery of one event has its id.
// The payload check covers source, detail-type and detail
// (WithPayloadPaths sets others).
func EventBridge[Out any](e *idemkit.Engine, name string, fn Handler[events.EventBridgeEvent, Out], opts ...Option) (Handler[events.EventBridgeEvent, Out], error) {
	byID := func(ev events.EventBridgeEvent) (string, error) { return ev.ID, nil }
	g, err := newGuard(e, name, kind{call: "EventBridge", defaultFP: []string{"source", "detail-type", "detail"}}, byID, opts)
	if err == nil && fn == nil {
		err = fmt.Errorf("idemlambda: EventBridge: %w: nil handler", idemkit.ErrInvalid)
	}
	if err != nil {
		return nil, err
	}
	if g.off {
		return fn, nil
	}
	return func(ctx context.Context, ev events.EventBridgeEvent) (Out, error) {
		out, _, err := invoke(ctx, g, ev, fn)
		return out, err
	}, nil
}
