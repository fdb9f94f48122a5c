package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// init registers the URL schemes; see the package documentation's URLs.
func init() {
	store.Register("postgres", openPostgres)
	store.Register("postgresql", openPostgres)
	store.Register("mysql", openMySQL)
}

// Driver names the URL openers use with sql.Open.
const (
	PostgresDriver = "pgx"
	MySQLDriver    = "mysql"
)

func openPostgres(ctx context.Context, u *url.URL) (store.Store, error) {
	dsn, opts, err := urlOptions(u)
	if err != nil {
		return nil, err
	}
	return openURL(ctx, u, Postgres, PostgresDriver, `_ "github.com/jackc/pgx/v5/stdlib"`, dsn.String(), opts)
}

func openMySQL(ctx context.Context, u *url.URL) (store.Store, error) {
	dsn, opts, err := urlOptions(u)
	if err != nil {
		return nil, err
	}
	host := dsn.Host
	if dsn.Port() == "" {
		host = net.JoinHostPort(dsn.Hostname(), "3306")
	}
	var user string
	if dsn.User != nil {
		user = dsn.User.Username()
		if pw, ok := dsn.User.Password(); ok {
			user += ":" + pw
		}
		user += "@"
	}
	mysqlDSN := user + "tcp(" + host + ")" + dsn.EscapedPath()
	if mysqlDSN[len(mysqlDSN)-1] == ')' {
		mysqlDSN += "/"
	}
	if dsn.RawQuery != "" {
		mysqlDSN += "?" + dsn.RawQuery
	}
	return openURL(ctx, u, MySQL, MySQLDriver, `_ "github.com/go-sql-driver/mysql"`, mysqlDSN, opts)
}

// Pool defaults of a Store opened by store.Open; the URL parameters
// max_open, max_idle, max_lifetime and max_idle_time change them. A pool
// that New is given is the caller's, and keeps the caller's settings.
const (
	// DefaultURLMaxOpen bounds the connections the pool opens
	// (sql.DB.SetMaxOpenConns): each waiting operation holds one, and a
	// server's connection limit is shared by every client (PostgreSQL's
	// max_connections is 100 by default).
	DefaultURLMaxOpen = 16
	// DefaultURLMaxLifetime is how long a connection is used at most
	// (sql.DB.SetConnMaxLifetime), so that a pool follows a failover or a
	// DNS change.
	DefaultURLMaxLifetime = 30 * time.Minute
	// DefaultURLMaxIdleTime is how long a connection stays idle before it
	// is closed (sql.DB.SetConnMaxIdleTime).
	DefaultURLMaxIdleTime = 5 * time.Minute
)

// ownParams are the URL parameters sqlstore reads; the driver gets the
// others.
var ownParams = []string{"table", "outbox_table", "create_table", "max_open", "max_idle", "max_lifetime", "max_idle_time"}

// urlOptions takes sqlstore's own parameters out of u, returning the URL
// the driver gets and the options they select.
func urlOptions(u *url.URL) (*url.URL, urlOpts, error) {
	q, err := store.Query(u)
	if err == nil {
		var o urlOpts
		if o, err = readParams(store.NewParams(u)); err == nil {
			dsn := *u
			for _, name := range ownParams {
				q.Del(name)
			}
			dsn.RawQuery = q.Encode()
			return &dsn, o, nil
		}
	}
	return nil, urlOpts{}, fmt.Errorf("store: open %s: %w", store.Redact(u.String()), err)
}

// readParams reads sqlstore's own parameters. The others are the driver's:
// Done is not called.
func readParams(p *store.Params) (urlOpts, error) {
	o := urlOpts{maxOpen: DefaultURLMaxOpen, maxLifetime: DefaultURLMaxLifetime, maxIdleTime: DefaultURLMaxIdleTime}
	table, ok, err := p.String("table")
	if err != nil {
		return o, err
	}
	if ok {
		o.opts = append(o.opts, WithTable(table))
	}
	outbox, ok, err := p.String("outbox_table")
	if err != nil {
		return o, err
	}
	if ok {
		o.opts = append(o.opts, WithOutboxTable(outbox))
		o.outbox = true
	}
	if create, ok, err := p.String("create_table"); err != nil {
		return o, err
	} else if ok {
		if o.create, err = strconv.ParseBool(create); err != nil {
			return o, fmt.Errorf("%w: create_table=%q is not a boolean", store.ErrInvalid, create)
		}
	}
	if n, ok, err := p.Int("max_open", 1); err != nil {
		return o, err
	} else if ok {
		o.maxOpen = n
	}
	o.maxIdle = o.maxOpen
	if n, ok, err := p.Int("max_idle", 0); err != nil {
		return o, err
	} else if ok {
		if n > o.maxOpen {
			return o, fmt.Errorf("%w: parameter max_idle=%d: at most max_open (%d)", store.ErrInvalid, n, o.maxOpen)
		}
		o.maxIdle = n
	}
	if d, ok, err := p.Duration("max_lifetime", 0); err != nil {
		return o, err
	} else if ok {
		o.maxLifetime = d
	}
	if d, ok, err := p.Duration("max_idle_time", 0); err != nil {
		return o, err
	} else if ok {
		o.maxIdleTime = d
	}
	return o, nil
}

type urlOpts struct {
	opts   []Option
	create bool
	outbox bool // outbox_table given: create_table creates the outbox too
	// the pool's bounds: max_open, max_idle, max_lifetime, max_idle_time
	maxOpen, maxIdle         int
	maxLifetime, maxIdleTime time.Duration
}

// configure applies o's pool bounds to db.
func (o urlOpts) configure(db *sql.DB) {
	db.SetMaxOpenConns(o.maxOpen)
	db.SetMaxIdleConns(o.maxIdle)
	db.SetConnMaxLifetime(o.maxLifetime)
	db.SetConnMaxIdleTime(o.maxIdleTime)
}

// openURL opens the pool, pings it, creates the table if asked, and
// builds the Store, which then owns the pool.
func openURL(ctx context.Context, u *url.URL, d Dialect, driver, importLine, dsn string, o urlOpts) (store.Store, error) {
	where := "store: open " + store.Redact(u.String())
	if !slices.Contains(sql.Drivers(), driver) {
		return nil, fmt.Errorf("%s: %w: the database/sql driver %q is not registered; import it: %s", where, store.ErrInvalid, driver, importLine)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", where, store.ErrInvalid, scrub(err, secrets(u)))
	}
	o.configure(db)
	s, err := New(db, d, o.opts...)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	s.ownsDB = true
	if err := db.PingContext(ctx); err != nil {
		s.Close()
		err = scrub(err, secrets(u))
		if badDSN(err) {
			// A value the driver cannot parse, or an unknown parameter
			// the server refused as a session setting: final, not an
			// outage to retry.
			return nil, fmt.Errorf("%s: %w: %w", where, store.ErrInvalid, err)
		}
		return nil, fmt.Errorf("%s: sqlstore: ping: %w: %w", where, store.ErrUnavailable, err)
	}
	if o.create {
		err := s.CreateTable(ctx)
		if err == nil && o.outbox {
			err = s.CreateOutbox(ctx)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: %w", where, scrub(err, secrets(u)))
		}
	}
	return s, nil
}

// secrets returns the values of u that store.Redact hides: its password
// and the values of parameters named like a secret. A server may quote
// them back in an error: go-sql-driver sends a parameter it does not know,
// password=VALUE say, as SET password=VALUE, whose syntax error quotes
// VALUE.
func secrets(u *url.URL) []string {
	var out []string
	if pw, ok := u.User.Password(); ok && pw != "" {
		out = append(out, pw)
	}
	r, err := url.Parse(store.Redact(u.String()))
	if err != nil {
		return out
	}
	redacted := r.Query()
	for name, values := range u.Query() {
		if redacted.Get(name) != "xxxxx" {
			continue
		}
		for _, v := range values {
			if v != "" && v != "xxxxx" {
				out = append(out, v)
			}
		}
	}
	return out
}

// scrub returns err with every one of secrets in its text replaced by
// xxxxx; it still wraps err, for errors.Is and errors.As.
func scrub(err error, secrets []string) error {
	msg := err.Error()
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	if msg == err.Error() {
		return err
	}
	return scrubbed{msg: msg, err: err}
}

// scrubbed is an error whose text had secrets taken out.
type scrubbed struct {
	msg string
	err error
}

func (e scrubbed) Error() string { return e.msg }
func (e scrubbed) Unwrap() error { return e.err }
