// Package idemfunc makes any function idempotent: a queue consumer, a
// webhook handler, a command. Wrap it under a name, with a function that
// extracts the message ID or business key, and every repeat of that key
// runs once and returns the stored result.
//
//	credit, err := idemfunc.Wrap(engine, "credit",
//		func(ev PaymentEvent) (string, error) { return ev.ID, nil }, handle)
//	...
//	balance, res, err := credit(ctx, ev) // res.Replayed on a redelivery
//
// # Names
//
// Each wrapper's name is its own key space: two consumers of one event,
// keyed by its ID, run once each. Wrappers with the same name over one
// store share their keys, so give each consumer its own name, and keep it
// across deploys (a renamed wrapper runs every key again). Keys are
// namespaced "func", so no other adapter's keys can meet a wrapper's.
//
// # Results and errors
//
// Results are stored with the engine's Codec (JSON by default, see
// idemkit.WithCodec); a replay returns the decoded copy. An error of fn
// releases the key so a redelivery runs fn again, unless the engine's
// ErrorCodec marks it final: idemkit.FinalErrors keeps a final error's
// identity on replay, so errors.Is works on the replayed error as on the
// first. A key function that fails or returns "" gives an error wrapping
// idemkit.ErrInvalid and fn does not run. A concurrent repeat gets
// idemkit.ErrInProgress unless the engine options include idemkit.WithWait.
//
// A result over the engine's size cap (idemkit.WithMaxResultSize) is
// returned to the call that ran fn, with an error wrapping
// idemkit.ErrResultTooLarge, and is not stored; the key keeps a terminal
// record, so every repeat gets an error wrapping idemkit.ErrResultTooLarge,
// marked replayed, and fn never runs twice.
// WithEngineOptions(idemkit.WithOversized(idemkit.ReleaseKey)) releases
// the key instead, so a redelivery runs fn again.
//
// # Database transactions
//
// fn's context carries the engine's claim, so fn can record its result in
// its own database transaction: idemkit.CompleteIn(ctx, st.Tx(tx), resp)
// with a store view bound to the transaction (sqlstore's Tx), then commit.
// The result and the business write commit together; the wrapper does not
// complete again, returns the committed result, and frees the key when the
// transaction rolled back.
package idemfunc
