package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

// keyFlags are the flags of get and forget.
type keyFlags struct {
	mode   idemkit.Mode
	scope  string
	result bool
	key    string
}

func parseKeyFlags(name string, args []string, withResult bool, stderr io.Writer) (keyFlags, error) {
	k := keyFlags{mode: idemkit.ModeDo}
	fs := flag.NewFlagSet("idemctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(stderr) }
	fs.Func("mode", "do, guard or token", modeFlag(&k.mode))
	fs.StringVar(&k.scope, "scope", "", "principal")
	if withResult {
		fs.BoolVar(&k.result, "result", false, "print the stored result")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return k, err
		}
		return k, errUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "idemctl %s: give exactly one KEY\n", name)
		usage(stderr)
		return k, errUsage
	}
	k.key = fs.Arg(0)
	return k, nil
}

func modeFlag(dst *idemkit.Mode) func(string) error {
	return func(v string) error {
		switch m := idemkit.Mode(v); m {
		case idemkit.ModeDo, idemkit.ModeGuard, idemkit.ModeToken:
			*dst = m
			return nil
		}
		return errors.New("must be do, guard or token")
	}
}

func (k keyFlags) opts() []idemkit.Option {
	if k.scope == "" {
		return nil
	}
	return []idemkit.Option{idemkit.WithScope(k.scope)}
}

// digest names a key in output without showing it.
func (k keyFlags) digest() string { return idemkit.Event{Key: k.key}.KeyDigest() }

func get(ctx context.Context, e *idemkit.Engine, args []string, out *printer, stderr io.Writer) error {
	k, err := parseKeyFlags("get", args, true, stderr)
	if err != nil {
		return err
	}
	info, err := e.Inspect(ctx, k.mode, k.key, k.opts()...)
	if errors.Is(err, store.ErrNotFound) {
		out.notFound(k.digest())
		return errNotFound
	}
	if err != nil {
		return err
	}
	var result []byte
	if k.result && (info.State == idemkit.StateCompleted || info.State == idemkit.StateFailed) {
		if result, err = e.StoredResult(ctx, k.mode, k.key, k.opts()...); err != nil {
			return err
		}
	}
	return out.info(k.digest(), info, result, k.result)
}

func forget(ctx context.Context, e *idemkit.Engine, args []string, out *printer, stderr io.Writer) error {
	k, err := parseKeyFlags("forget", args, false, stderr)
	if err != nil {
		return err
	}
	ok, err := e.Forget(ctx, k.mode, k.key, k.opts()...)
	if err != nil {
		return err
	}
	if !ok {
		out.notFound(k.digest())
		return errNotFound
	}
	return out.forgotten(k.digest())
}

func scan(ctx context.Context, e *idemkit.Engine, namespace string, args []string, out *printer, stderr io.Writer) error {
	mode := idemkit.ModeDo
	limit := 100
	fs := flag.NewFlagSet("idemctl scan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(stderr) }
	fs.Func("mode", "do, guard or token", modeFlag(&mode))
	fs.IntVar(&limit, "limit", limit, "most keys listed")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() != 0 || limit <= 0 {
		fmt.Fprintln(stderr, "idemctl scan: takes no arguments; -limit must be positive")
		return errUsage
	}
	sc, ok := e.Store().(store.Scanner)
	if !ok {
		return fmt.Errorf("this store cannot list its keys (%T has no Scan)", e.Store())
	}
	prefix := namespace + ":" + map[idemkit.Mode]string{idemkit.ModeGuard: "g", idemkit.ModeDo: "i", idemkit.ModeToken: "t"}[mode] + ":"
	var rows []scanRow
	var bad int
	err := sc.Scan(ctx, prefix, func(key string, ent store.Entry) bool {
		info, err := idemkit.Describe(mode, ent)
		if err != nil {
			bad++
			return true
		}
		rows = append(rows, scanRow{StoreKey: key, Scope: idemkit.ScopeOf(key), Info: info})
		return len(rows) < limit
	})
	if err != nil {
		return err
	}
	if bad > 0 {
		fmt.Fprintf(stderr, "idemctl scan: %d entries under %s were not idemkit records\n", bad, strings.TrimSuffix(prefix, ":"))
	}
	return out.scan(rows)
}
