// Command idemctl looks up, lists and forgets idemkit keys in any store, for
// support staff and operators: "what happened to this customer's request,
// and can I let them retry?".
//
//	idemctl -store URL get    [-mode do|guard|token] [-scope S] [-result] KEY
//	idemctl -store URL forget [-mode do|guard|token] [-scope S] KEY
//	idemctl -store URL scan   [-mode do|guard|token] [-limit N]
//	idemctl -store URL abandoned [-older-than D]
//
// The store URL is the one the service uses (IDEMKIT_STORE when -store is
// not given). A service that runs with a key secret
// (idemkit.WithKeySecret) names its keys with it, and idemctl finds them
// only with the same secret: the text of IDEMKIT_KEY_SECRET, or the
// contents of the file named by -key-secret-file or IDEMKIT_KEY_SECRET_FILE
// (one trailing newline removed), at least 32 bytes either way. The secret
// is never printed. Keys are given as the service's caller gave them, with the
// principal as -scope (for tokens, the token as KEY and its principal as
// -scope); idemctl prints them only as digests, and prints a stored result
// only with -result: a response stored by idemhttp or idemproxy decoded
// (status, headers, and the body as text when it is UTF-8, base64
// otherwise), any other result as text, or base64 when it is not UTF-8.
// The flags of get and forget may follow KEY as well as precede it. scan prints the store key names the engine wrote as
// digests (its default) as they are stored, and any segment that is not a
// digest (keys written with idemkit.WithReadableKeys, and all of them with
// -readable-keys) as "sha256:" and a short digest ("hmac:" with a key
// secret). abandoned lists the operations abandoned mid-way (package
// completer): claims whose lease ended before they finished, made at least
// -older-than ago (default 1m), with their age, fencing token and recovery
// points (how many steps were recorded, the last one's name digest and
// when it began), then a count line; it exits 0 whatever the count.
// Output is a table, or JSON with -json.
//
// Exit status: 0 found (or forgotten), 3 not found, 2 usage error, 1 any
// other error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/go-sql-driver/mysql" // the mysql driver for mysql://
	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver for postgres://

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/setup"
	"github.com/idemkit/idemkit/store"
	_ "github.com/idemkit/idemkit/store/boltstore"  // bolt://
	_ "github.com/idemkit/idemkit/store/memstore"   // mem://
	_ "github.com/idemkit/idemkit/store/redisstore" // redis://, rediss://, redis+sentinel://, redis+cluster://
	_ "github.com/idemkit/idemkit/store/sqlstore"   // postgres://, postgresql://, mysql://
)

// Exit statuses.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitNotFound = 3
)

var (
	errUsage    = errors.New("usage error")
	errNotFound = errors.New("not found")
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// globals are the flags before the command.
type globals struct {
	storeURL   string
	namespace  string
	readable   bool
	json       bool
	secret     []byte // the key secret, or nil
	secretFile string // -key-secret-file
}

// run runs one command line and returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	g, rest, err := parseGlobals(args, getenv, stderr)
	if err != nil {
		return status(err, stderr)
	}
	s, err := store.Open(ctx, g.storeURL)
	if err != nil {
		return status(err, stderr)
	}
	defer closeStore(s, stderr)
	opts := []idemkit.Option{idemkit.WithObserver(nil), idemkit.WithNamespace(g.namespace)}
	if g.readable {
		opts = append(opts, idemkit.WithReadableKeys())
	}
	if g.secret != nil {
		opts = append(opts, idemkit.WithKeySecret(g.secret))
	}
	e, err := idemkit.New(s, opts...)
	if err != nil {
		return status(err, stderr)
	}
	out := &printer{w: stdout, json: g.json}
	switch rest[0] {
	case "get":
		err = get(ctx, e, rest[1:], out, stderr)
	case "forget":
		err = forget(ctx, e, rest[1:], out, stderr)
	case "scan":
		err = scan(ctx, e, g.namespace, g.readable, g.secret != nil, rest[1:], out, stderr)
	case "abandoned":
		err = abandoned(ctx, e, g.readable, g.secret != nil, rest[1:], out, stderr)
	default:
		fmt.Fprintf(stderr, "idemctl: unknown command %q\n", rest[0])
		usage(stderr)
		err = errUsage
	}
	return status(err, stderr)
}

func closeStore(s store.Store, stderr io.Writer) {
	if c, ok := s.(store.Closer); ok {
		if err := c.Close(); err != nil {
			fmt.Fprintln(stderr, "idemctl: close store:", err)
		}
	}
}

// status reports err and maps it to an exit status.
func status(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	case errors.Is(err, errNotFound):
		return exitNotFound
	}
	fmt.Fprintln(stderr, "idemctl:", err)
	return exitError
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  idemctl [-store URL] [-namespace NS] [-json] get    [-mode M] [-scope S] [-result] KEY
  idemctl [-store URL] [-namespace NS] [-json] forget [-mode M] [-scope S] KEY
  idemctl [-store URL] [-namespace NS] [-json] scan   [-mode M] [-limit N]
  idemctl [-store URL] [-namespace NS] [-json] abandoned [-older-than D]

  -store URL     the service's store (default $IDEMKIT_STORE)
  -namespace NS  the engine's namespace (default idem)
  -readable-keys the service runs with idemkit.WithReadableKeys (scan then
                 prints every key and scope segment as a digest)
  -key-secret-file F  the service's key secret (idemkit.WithKeySecret) is in
                 file F (default $IDEMKIT_KEY_SECRET_FILE, or the text of
                 $IDEMKIT_KEY_SECRET); at least 32 bytes
  -json          print JSON instead of a table
  -mode M        do (idempotency keys, default), guard (windows) or token
  -scope S       the principal the key belongs to (a token's owner)
  -result        get: also print the stored result (a stored HTTP response
                 decoded: status, headers, body as text or base64)
  -limit N       scan: stop after N keys (default 100)
  -older-than D  abandoned: list claims whose lease ended, made at least D
                 ago (default 1m); exit 0 whatever the count

The flags of get and forget may also follow KEY (get KEY -result); after
-- every argument is the KEY.

Exit status: 0 found, 3 not found, 2 usage error, 1 other error.
`)
}

func parseGlobals(args []string, getenv func(string) string, stderr io.Writer) (globals, []string, error) {
	g := globals{storeURL: getenv("IDEMKIT_STORE"), namespace: idemkit.DefaultNamespace}
	fs := flag.NewFlagSet("idemctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(stderr) }
	fs.StringVar(&g.storeURL, "store", g.storeURL, "store URL")
	fs.StringVar(&g.namespace, "namespace", g.namespace, "engine namespace")
	fs.BoolVar(&g.readable, "readable-keys", false, "readable store keys")
	fs.BoolVar(&g.json, "json", false, "JSON output")
	fs.StringVar(&g.secretFile, "key-secret-file", getenv(setup.EnvKeySecretFile), "file holding the key secret")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return g, nil, err
		}
		return g, nil, errUsage
	}
	var err error
	if g.secret, err = setup.LoadKeySecret(getenv(setup.EnvKeySecret), g.secretFile); err != nil {
		fmt.Fprintln(stderr, "idemctl:", err)
		return g, nil, errUsage
	}
	switch {
	case g.storeURL == "":
		fmt.Fprintln(stderr, "idemctl: no store: give -store URL or set IDEMKIT_STORE")
	case fs.NArg() == 0:
		fmt.Fprintln(stderr, "idemctl: no command")
	default:
		return g, fs.Args(), nil
	}
	usage(stderr)
	return g, nil, errUsage
}
