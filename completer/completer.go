// Package completer finds operations abandoned mid-way, for
// reconciliation: keyed operations (Do, Begin, BeginBatch) whose claim's
// lease ended before they finished (the process crashed, or was paused past
// its lease and never came back), and that are older than a threshold. It
// reports each by digests only (its store key, scope digest, age, fencing
// token, and the recovery points it recorded with idemkit.Step: how many,
// which was last and when), so that an operator or a job can reconcile it
// with the systems it called.
//
// Find only reads: it lists the engine's keys with a store.Scanner
// (memstore, boltstore, redisstore including Cluster, sqlstore), so any
// number of instances may run it at once. Resume also finishes what it
// finds: an operation claimed with idemkit.WithInput is taken over and
// run by the function registered for its name (idemkit.Funcs), skipping
// its recorded steps; one it cannot resume (no input, no function) is
// reported in its Outcome and left as it is. Its client's retry resumes
// an abandoned operation the same way.
//
// # Running it
//
// Run runs a Resume pass every interval until its context ends; start
// one per process of a fleet, or one per fleet.
//
// # Metrics and events
//
// Find returns a Report with the counts of one pass, and calls the
// function given with WithObserver once for each abandoned operation it
// reports. Resume calls the function given with WithOutcomes with each
// operation's Outcome, whose Kind (resumed, failed, reported, taken,
// error) is its metrics label, and Run calls the one given with
// WithPasses after each pass. The otel module's idemotel.NewCompleter
// records them as OpenTelemetry metrics; to log them too:
//
//	m, _ := idemotel.NewCompleter(idemotel.WithMeterProvider(mp))
//	err := completer.Run(ctx, e, sc, funcs, time.Minute,
//		completer.WithPasses(m.Pass),
//		completer.WithOutcomes(func(o completer.Outcome) {
//			m.Outcome(o)
//			slog.Info("abandoned operation", "store_key_digest", digest(o.StoreKey), "outcome", o.Kind(), "error", o.Err)
//		}))
package completer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/store"
)

// Abandoned is an operation whose claim's lease ended before it finished,
// older than the threshold (WithOlderThan). It holds no key, scope, input
// or result: only digests, times and counts.
type Abandoned struct {
	// StoreKey is the operation's store key, <namespace>:i:<scope
	// digest>:<key digest>, as idemctl scan lists it. An engine that runs
	// with idemkit.WithReadableKeys writes the key and scope in clear:
	// print such a store key only as a digest (idemctl does).
	StoreKey string
	// Scope is the store key's scope segment: a digest of the operation's
	// scope, or "-" for an operation without one (idemkit.ScopeOf).
	Scope string
	// Created is when the abandoned claim was made, on the engine's clock;
	// Age is how long before the pass that was.
	Created time.Time
	Age     time.Duration
	// Fence is the abandoned claim's fencing token: the next claim of the
	// key gets a larger one.
	Fence uint64
	// FingerprintDigest is a short digest of the claim's payload
	// fingerprint ("" when there is none), as idemkit.KeyInfo has it.
	FingerprintDigest string
	// Steps is how many of the operation's steps recorded a result (its
	// recovery points, idemkit.Step), by this claim or an earlier one.
	Steps int
	// LastStep is the StepDigest of the name of the step recorded last,
	// and LastStepAt when that step began, on the engine's clock (both
	// zero without steps).
	LastStep   string
	LastStepAt time.Time
}

// Report is what one pass found.
type Report struct {
	// Abandoned lists the abandoned operations, oldest first.
	Abandoned []Abandoned
	// Scanned is the number of the engine's Do records listed, and
	// InProgress how many of them were claims in progress: running,
	// abandoned, or abandoned too recently to be reported (Recent).
	Scanned, InProgress int
	// Recent counts the claims whose lease ended that are younger than
	// the threshold: the next pass reports those that are still there.
	Recent int
	// Unreadable counts the entries under the engine's key prefixes that
	// the engine did not write (another application's keys in a shared
	// namespace, or damaged values); they are skipped.
	Unreadable int
}

// Find lists the Do records of e with s (a store.Scanner over e's store,
// or over the store it wraps) and reports the operations abandoned
// mid-way: claims in progress whose lease has ended (idemkit.KeyInfo's
// Lease is zero) and that were made at least the threshold ago
// (WithOlderThan, default DefaultOlderThan). For each it reads the
// operation's recorded steps with one more listing of e's step records,
// made only when an operation is reported. It calls the observer
// (WithObserver) for each, oldest first, after both listings.
//
// A claim made through an OnStore view that committed without ending is
// never reported: it has no lease to end (see idemkit.Engine.OnStore).
//
// It returns an error wrapping idemkit.ErrInvalid for a nil engine or
// scanner or an invalid option, ctx's error when ctx ends, and the
// store's error otherwise; a listing is not a snapshot (see
// store.Scanner), so keys written or ending during a pass may or may not
// be seen.
func Find(ctx context.Context, e *idemkit.Engine, s store.Scanner, opts ...Option) (Report, error) {
	cfg := defaultConfig()
	errs := options.Collect(&cfg, opts)
	if e == nil {
		errs = append(errs, errors.New("nil engine"))
	}
	if s == nil {
		errs = append(errs, errors.New("nil scanner"))
	}
	if err := options.Invalid(errs...); err != nil {
		return Report{}, fmt.Errorf("completer: %w", err)
	}
	ns := e.Namespace()
	doPrefix, stepPrefix := ns+":i:", ns+":s:"
	now := cfg.clock()

	var rep Report
	err := scan(ctx, s, doPrefix, func(key string, ent store.Entry) {
		info, err := idemkit.Describe(idemkit.ModeDo, ent)
		if err != nil {
			rep.Unreadable++
			return
		}
		rep.Scanned++
		if info.State != idemkit.StateInProgress {
			return
		}
		rep.InProgress++
		if info.Lease > 0 {
			return
		}
		age := now.Sub(info.Created)
		if age < cfg.olderThan {
			rep.Recent++
			return
		}
		rep.Abandoned = append(rep.Abandoned, Abandoned{StoreKey: key, Scope: idemkit.ScopeOf(key),
			Created: info.Created, Age: age, Fence: info.Fence, FingerprintDigest: info.FingerprintDigest})
	})
	if err != nil {
		return Report{}, err
	}
	if len(rep.Abandoned) > 0 {
		// Step records: <namespace>:s:<scope>:<key digest>.<lineage>.<name
		// digest>: the operation's store key after its prefix, the
		// operation's lineage, then the name's digest.
		ops := make(map[string]*Abandoned, len(rep.Abandoned))
		for i := range rep.Abandoned {
			ops[rep.Abandoned[i].StoreKey[len(doPrefix):]] = &rep.Abandoned[i]
		}
		err = scan(ctx, s, stepPrefix, func(key string, ent store.Entry) {
			rest := key[len(stepPrefix):]
			dot := strings.LastIndexByte(rest, '.')
			lin := -1
			if dot > 0 {
				lin = strings.LastIndexByte(rest[:dot], '.')
			}
			if lin < 0 {
				rep.Unreadable++
				return
			}
			a := ops[rest[:lin]]
			if a == nil {
				return
			}
			info, err := idemkit.Describe(idemkit.ModeDo, ent)
			if err != nil {
				rep.Unreadable++
				return
			}
			a.Steps++
			if a.LastStep == "" || info.Created.After(a.LastStepAt) {
				a.LastStep, a.LastStepAt = rest[dot+1:], info.Created
			}
		})
		if err != nil {
			return Report{}, err
		}
	}
	slices.SortFunc(rep.Abandoned, func(a, b Abandoned) int {
		return cmp.Or(cmp.Compare(b.Age, a.Age), strings.Compare(a.StoreKey, b.StoreKey))
	})
	if cfg.observer != nil {
		for _, a := range rep.Abandoned {
			cfg.observer(a)
		}
	}
	return rep, nil
}

// scan calls fn with every live key under prefix and its entry, and stops
// when ctx ends.
func scan(ctx context.Context, s store.Scanner, prefix string, fn func(string, store.Entry)) error {
	var stopped error
	err := s.Scan(ctx, prefix, func(key string, ent store.Entry) bool {
		if stopped = ctx.Err(); stopped != nil {
			return false
		}
		fn(key, ent)
		return true
	})
	if err == nil {
		err = stopped
	}
	if err != nil {
		return fmt.Errorf("completer: list %s: %w", strings.TrimSuffix(prefix, ":"), err)
	}
	return nil
}

// StepDigest returns the digest by which the store names the step called
// name (see idemkit.Step), as Abandoned's LastStep holds it: an operator
// who knows the operation's step names finds which one was last with it.
func StepDigest(name string) string {
	sum := sha256.Sum256([]byte(name))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}
