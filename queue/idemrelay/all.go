package idemrelay

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// All returns a Publisher that publishes each message through every one
// of pubs, concurrently, and confirms it only when all of them did: a
// message that one broker refused stays in the outbox, and its next
// attempt publishes it to every broker again, which JetStream drops as a
// duplicate and an idemamqp consumer deduplicates. A confirm is a
// Duplicate only when every Publisher reported it so (RabbitMQ never
// does). All refuses an empty list and a nil Publisher with an error
// wrapping idemkit.ErrInvalid.
func All(pubs ...Publisher) (Publisher, error) {
	if len(pubs) == 0 {
		return nil, fmt.Errorf("idemrelay.All: %w: no Publisher", idemkit.ErrInvalid)
	}
	for i, p := range pubs {
		if p == nil {
			return nil, fmt.Errorf("idemrelay.All: %w: Publisher %d is nil", idemkit.ErrInvalid, i+1)
		}
	}
	return all(pubs), nil
}

type all []Publisher

// Publish implements Publisher.
func (a all) Publish(ctx context.Context, msgs []sqlstore.OutboxMessage) []Confirm {
	results := make([][]Confirm, len(a))
	done := make(chan struct{}, len(a))
	for i, p := range a {
		go func() {
			results[i] = p.Publish(ctx, msgs)
			done <- struct{}{}
		}()
	}
	for range a {
		<-done
	}
	out := make([]Confirm, len(msgs))
	for i := range out {
		out[i].Duplicate = true
		var errs []error
		for j, r := range results {
			switch {
			case len(r) != len(msgs):
				errs = append(errs, fmt.Errorf("publisher %d answered %d confirms for %d messages", j+1, len(r), len(msgs)))
				out[i].Duplicate = false
			case r[i].Err != nil:
				errs = append(errs, fmt.Errorf("publisher %d: %w", j+1, r[i].Err))
			}
			if len(r) == len(msgs) && !r[i].Duplicate {
				out[i].Duplicate = false
			}
		}
		if out[i].Err = errors.Join(errs...); out[i].Err != nil {
			out[i].Duplicate = false
		}
	}
	return out
}
