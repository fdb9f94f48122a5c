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
	// Flags may come before or after the KEY (get KEY -result); after
	// "--" every argument is a KEY, for one that starts with '-'.
	var keys []string
	for rest := args; len(rest) > 0; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return k, err
			}
			return k, errUsage
		}
		left := fs.Args()
		if used := len(rest) - len(left); used > 0 && rest[used-1] == "--" {
			keys = append(keys, left...)
			break
		}
		if len(left) == 0 {
			break
		}
		keys, rest = append(keys, left[0]), left[1:]
	}
	if len(keys) != 1 {
		fmt.Fprintf(stderr, "idemctl %s: give exactly one KEY\n", name)
		usage(stderr)
		return k, errUsage
	}
	k.key = keys[0]
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

// digest names a key in output without showing it: the digest the
// service's logs show for it (keyed with the service's key secret, when
// idemctl has it).
func (k keyFlags) digest(e *idemkit.Engine) string {
	d, err := e.KeyDigest(k.key, k.opts()...)
	if err != nil {
		return "?" // KeyDigest takes the scope alone, which is all opts holds
	}
	return d
}

func get(ctx context.Context, e *idemkit.Engine, args []string, out *printer, stderr io.Writer) error {
	k, err := parseKeyFlags("get", args, true, stderr)
	if err != nil {
		return err
	}
	info, err := e.Inspect(ctx, k.mode, k.key, k.opts()...)
	if errors.Is(err, store.ErrNotFound) {
		out.notFound(k.digest(e))
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
	return out.info(k.digest(e), info, result, k.result)
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
		out.notFound(k.digest(e))
		return errNotFound
	}
	return out.forgotten(k.digest(e))
}

func scan(ctx context.Context, e *idemkit.Engine, namespace string, readable, keyed bool, args []string, out *printer, stderr io.Writer) error {
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
		shown, scope := safeStoreKey(key, readable, digester(e, keyed))
		rows = append(rows, scanRow{StoreKey: shown, Scope: scope, Info: info})
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

// Digest segments of store keys: the engine's default key names hold a
// 72-bit scope digest and a 128-bit key digest, unpadded base64url.
const (
	scopeDigestChars = 12
	keyDigestChars   = 22
)

// safeStoreKey returns what scan prints of a store key name and its scope
// segment. Names the engine wrote as digests (the default) are printed as
// stored, so an operator can find them in the store. A segment that is not
// a digest (a service with WithReadableKeys writes keys and principals in
// clear), and every segment when readable says the service writes readable
// keys, is printed as digestOf names it instead: idemctl never
// prints a key, token or principal.
func safeStoreKey(name string, readable bool, digestOf func(string) string) (shown, scope string) {
	ns, rest, ok1 := strings.Cut(name, ":")
	space, rest, ok2 := strings.Cut(rest, ":")
	scope, key, ok3 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || !ok3 || len(space) != 1 {
		return digestOf(name), ""
	}
	if scope != "-" && (readable || !isBase64URL(scope, scopeDigestChars)) {
		scope = digestOf(scope)
	}
	if readable || !isBase64URL(key, keyDigestChars) {
		key = digestOf(key)
	}
	return ns + ":" + space + ":" + scope + ":" + key, scope
}

// digester returns the function that names a segment s by a short digest
// of it: the engine's log digest of s, "sha256:" and 12 hex digits, or
// "hmac:" and 12 hex digits when keyed by the service's key secret.
func digester(e *idemkit.Engine, keyed bool) func(string) string {
	label := "sha256:"
	if keyed {
		label = "hmac:"
	}
	return func(s string) string {
		d, _ := e.KeyDigest(s) // no options: no error
		return label + d
	}
}

// isBase64URL reports whether s is n characters of the base64url alphabet.
func isBase64URL(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range []byte(s) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
