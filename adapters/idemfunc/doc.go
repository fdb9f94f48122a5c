// Package idemfunc makes any function idempotent: a queue consumer, a
// webhook handler, a command. Wrap it with a function that extracts the
// message ID or business key, and every repeat of that key runs once and
// returns the stored result.
//
//	consume := idemfunc.Wrap(engine, func(m Msg) (string, error) { return m.ID, nil }, handle)
//
// Redelivered messages (at-least-once queues, webhook retries) then run
// their side effect once. Results are stored with the engine's Codec (JSON
// by default); errors release the key so a redelivery runs again, unless
// the engine's ErrorCodec marks them final.
package idemfunc
