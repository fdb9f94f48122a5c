package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"

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

// urlOptions takes sqlstore's own parameters out of u, returning the URL
// the driver gets and the options they select.
func urlOptions(u *url.URL) (*url.URL, urlOpts, error) {
	var o urlOpts
	p := store.NewParams(&url.URL{RawQuery: u.RawQuery})
	table, ok, err := p.String("table")
	if err != nil {
		return nil, o, fmt.Errorf("store: open %s: %w", store.Redact(u.String()), err)
	}
	if ok {
		o.opts = append(o.opts, WithTable(table))
	}
	create, ok, err := p.String("create_table")
	if err == nil && ok {
		o.create, err = strconv.ParseBool(create)
		if err != nil {
			err = fmt.Errorf("%w: create_table=%q is not a boolean", store.ErrInvalid, create)
		}
	}
	if err != nil {
		return nil, o, fmt.Errorf("store: open %s: %w", store.Redact(u.String()), err)
	}
	dsn := *u
	q := dsn.Query()
	q.Del("table")
	q.Del("create_table")
	dsn.RawQuery = q.Encode()
	return &dsn, o, nil
}

type urlOpts struct {
	opts   []Option
	create bool
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
		return nil, fmt.Errorf("%s: %w: %w", where, store.ErrInvalid, err)
	}
	s, err := New(db, d, o.opts...)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	s.ownsDB = true
	if err := db.PingContext(ctx); err != nil {
		s.Close()
		if badDSN(err) {
			// A value the driver cannot parse, or an unknown parameter
			// the server refused as a session setting: final, not an
			// outage to retry.
			return nil, fmt.Errorf("%s: %w: %w", where, store.ErrInvalid, err)
		}
		return nil, fmt.Errorf("%s: sqlstore: ping: %w: %w", where, store.ErrUnavailable, err)
	}
	if o.create {
		if err := s.CreateTable(ctx); err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	return s, nil
}
