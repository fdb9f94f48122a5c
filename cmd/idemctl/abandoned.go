package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/completer"
	"github.com/idemkit/idemkit/store"
)

// abandoned lists the operations abandoned mid-way (completer.Find): their
// lease ended, they never finished, and they are older than -older-than.
func abandoned(ctx context.Context, e *idemkit.Engine, readable, keyed bool, args []string, out *printer, stderr io.Writer) error {
	olderThan := completer.DefaultOlderThan
	fs := flag.NewFlagSet("idemctl abandoned", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(stderr) }
	fs.DurationVar(&olderThan, "older-than", olderThan, "report claims made at least this long ago")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() != 0 || olderThan < 0 {
		fmt.Fprintln(stderr, "idemctl abandoned: takes no arguments; -older-than must not be negative")
		return errUsage
	}
	sc, ok := e.Store().(store.Scanner)
	if !ok {
		return fmt.Errorf("this store cannot list its keys (%T has no Scan)", e.Store())
	}
	rep, err := completer.Find(ctx, e, sc, completer.WithOlderThan(olderThan))
	if err != nil {
		return err
	}
	if rep.Unreadable > 0 {
		fmt.Fprintf(stderr, "idemctl abandoned: %d entries under %s were not idemkit records\n", rep.Unreadable, e.Namespace())
	}
	return out.abandoned(rep, olderThan, digester(e, keyed), readable)
}

// abandonedRow is what abandoned prints of an operation.
type abandonedRow struct {
	StoreKey    string  `json:"store_key"`
	ScopeDigest string  `json:"scope_digest"`
	Created     string  `json:"created"`
	AgeSeconds  float64 `json:"age_seconds"`
	Fence       uint64  `json:"fence"`
	Steps       int     `json:"steps"`
	// LastStep is the digest of the last recorded step's name
	// (completer.StepDigest), LastStepAt when it began.
	LastStep   string `json:"last_step_digest,omitempty"`
	LastStepAt string `json:"last_step_at,omitempty"`
}

// abandonedView is what abandoned prints with -json.
type abandonedView struct {
	OlderThanSeconds float64        `json:"older_than_seconds"`
	Abandoned        []abandonedRow `json:"abandoned"`
	Scanned          int            `json:"scanned"`
	InProgress       int            `json:"in_progress"`
	Recent           int            `json:"recent"`
}

func (p *printer) abandoned(rep completer.Report, olderThan time.Duration, digestOf func(string) string, readable bool) error {
	v := abandonedView{OlderThanSeconds: olderThan.Seconds(), Abandoned: []abandonedRow{},
		Scanned: rep.Scanned, InProgress: rep.InProgress, Recent: rep.Recent}
	for _, a := range rep.Abandoned {
		shown, scope := safeStoreKey(a.StoreKey, readable, digestOf)
		r := abandonedRow{StoreKey: shown, ScopeDigest: scope, Created: a.Created.UTC().Format(time.RFC3339Nano),
			AgeSeconds: a.Age.Round(time.Millisecond).Seconds(), Fence: a.Fence, Steps: a.Steps, LastStep: a.LastStep}
		if !a.LastStepAt.IsZero() {
			r.LastStepAt = a.LastStepAt.UTC().Format(time.RFC3339Nano)
		}
		v.Abandoned = append(v.Abandoned, r)
	}
	if p.json {
		return json.NewEncoder(p.w).Encode(v)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	if len(rep.Abandoned) > 0 {
		fmt.Fprintln(tw, "STORE KEY\tAGE\tFENCING TOKEN\tSTEPS\tLAST STEP\tLAST STEP AT")
	}
	for i, a := range rep.Abandoned {
		r := v.Abandoned[i]
		last, at := "-", "-"
		if r.LastStep != "" {
			last, at = r.LastStep, r.LastStepAt
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%s\t%s\n", r.StoreKey, a.Age.Round(time.Second), r.Fence, r.Steps, last, at)
	}
	fmt.Fprintf(tw, "(%d abandoned older than %v; %d in progress, %d whose lease ended more recently, of %d keys)\n",
		len(rep.Abandoned), olderThan, rep.InProgress, rep.Recent, rep.Scanned)
	return tw.Flush()
}
