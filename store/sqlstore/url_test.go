package sqlstore_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// mysqlURL returns the mysql:// URL of the test database.
func mysqlURL(t *testing.T) *url.URL {
	cfg, err := mysql.ParseDSN(my.dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := &url.URL{Scheme: "mysql", Host: strings.TrimSuffix(strings.TrimPrefix(cfg.Addr, "tcp("), ")"), Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else {
		u.User = url.User(cfg.User)
	}
	return u
}

// TestOpenURL opens each database through store.Open with a table
// parameter, creating the table, and uses it.
func TestOpenURL(t *testing.T) {
	pgURL, err := url.Parse(pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	myURL := mysqlURL(t)
	for _, u := range []*url.URL{pgURL, withScheme(pgURL, "postgresql"), myURL} {
		t.Run(u.Scheme, func(t *testing.T) {
			q := u.Query()
			q.Set("table", "opened_"+u.Scheme)
			q.Set("outbox_table", "opened_outbox_"+u.Scheme)
			q.Set("create_table", "true")
			u := *u
			u.RawQuery = q.Encode()
			s, err := store.Open(t.Context(), u.String())
			if err != nil {
				t.Fatal(err)
			}
			defer s.(store.Closer).Close()
			set, _, err := s.SetNX(t.Context(), "k", []byte("v"), time.Minute)
			if err != nil || !set {
				t.Fatalf("SetNX = %v, %v", set, err)
			}
			mustHold(t, s, "k", []byte("v"))
			st := s.(*sqlstore.Store)
			if st.OutboxTable() != "opened_outbox_"+u.Scheme {
				t.Fatalf("outbox table %q", st.OutboxTable())
			}
			if _, err := st.Tx(st.DB()).Enqueue(t.Context(), placed("o-"+u.Scheme)); err != nil {
				t.Fatalf("Enqueue on the outbox create_table made: %v", err)
			}
		})
	}
}

func withScheme(u *url.URL, scheme string) *url.URL {
	c := *u
	c.Scheme = scheme
	return &c
}

// TestOpenURLErrors checks the errors of bad URLs and unreachable
// servers: the right sentinel, and never the password.
func TestOpenURLErrors(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, tc := range []struct {
		url  string
		want error
	}{
		{"mysql://root:" + secret + "@127.0.0.1:1/db", store.ErrUnavailable},
		{"postgres://postgres:" + secret + "@127.0.0.1:1/db?sslmode=disable", store.ErrUnavailable},
		{"postgres://postgres:" + secret + "@127.0.0.1:1/db?table=bad-name", store.ErrInvalid},
		{"postgres://postgres:" + secret + "@127.0.0.1:1/db?table=a&table=b", store.ErrInvalid},
		{"mysql://root:" + secret + "@127.0.0.1:1/db?create_table=maybe", store.ErrInvalid},
		{"mysql://root:" + secret + "@127.0.0.1:1/db?outbox_table=bad-name", store.ErrInvalid},
		// libpq's sslpassword (the client key's passphrase) is a secret too.
		{"postgres://postgres@127.0.0.1:1/db?sslmode=disable&sslpassword=" + secret, store.ErrUnavailable},
		{"postgres://postgres@127.0.0.1:1/db?sslmode=disable&sslpassword=" + secret + "&table=bad-name", store.ErrInvalid},
		// Values the driver cannot parse are refused before any dial.
		{"postgres://postgres:" + secret + "@127.0.0.1:1/db?connect_timeout=bad", store.ErrInvalid},
		{"postgres://postgres:" + secret + "@127.0.0.1:1/db?sslmode=bad", store.ErrInvalid},
		{"mysql://root:" + secret + "@127.0.0.1:1/db?timeout=bad", store.ErrInvalid},
	} {
		s, err := store.Open(t.Context(), tc.url)
		if err == nil {
			s.(store.Closer).Close()
			t.Errorf("Open(%s) succeeded", store.Redact(tc.url))
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("Open(%s) = %v, want an error wrapping %v", store.Redact(tc.url), err, tc.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%s) error shows the password: %v", store.Redact(tc.url), err)
		}
	}
}

// TestOpenURLUnknownParameter checks that a parameter neither sqlstore nor
// the driver knows is not ignored: the driver passes it to the server as a
// session setting, which refuses it, and Open fails naming it. The
// PostgreSQL URL carries a password (the test server trusts loopback and
// ignores it), which the error must not show. The error wraps
// store.ErrInvalid, not store.ErrUnavailable: a retry cannot fix a typo.
func TestOpenURLUnknownParameter(t *testing.T) {
	const secret = "s3cr3t-pw"
	pgURL, err := url.Parse(pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if pgURL.User != nil {
		pgURL.User = url.UserPassword(pgURL.User.Username(), secret)
	}
	for _, base := range []*url.URL{pgURL, mysqlURL(t)} {
		for _, param := range []string{"tabel", "bogus_setting"} {
			u := *base
			q := u.Query()
			q.Set(param, "1")
			q.Set("table", "unknown_param")
			u.RawQuery = q.Encode()
			s, err := store.Open(t.Context(), u.String())
			if err == nil {
				s.(store.Closer).Close()
				t.Errorf("Open(%s) with unknown parameter %s succeeded", store.Redact(u.String()), param)
				continue
			}
			if !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrUnavailable) {
				t.Errorf("Open(%s) with unknown parameter %s = %v; want ErrInvalid, not ErrUnavailable", store.Redact(u.String()), param, err)
			}
			if !strings.Contains(err.Error(), param) || strings.Contains(err.Error(), secret) {
				t.Errorf("Open(%s): %v; want an error naming %s, without the password", store.Redact(u.String()), err, param)
			}
		}
	}
}

// TestOpenURLSecretParameterNotEchoed opens the MySQL test database with
// a password given as a query parameter, which go-sql-driver does not
// know and sends to the server as a session setting, SET password=VALUE:
// the server refuses it with a syntax error that quotes the value. The
// error must not show the value (store.Redact hides such parameters in
// the URL itself), and must wrap store.ErrInvalid, not
// store.ErrUnavailable: a retry cannot fix the URL.
func TestOpenURLSecretParameterNotEchoed(t *testing.T) {
	const secret = "s3cr3tpw"
	u := mysqlURL(t)
	u.RawQuery = url.Values{"password": {secret}}.Encode()
	s, err := store.Open(t.Context(), u.String())
	if err == nil {
		s.(store.Closer).Close()
		t.Fatalf("Open(%s) succeeded", store.Redact(u.String()))
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("Open(%s) error shows the password parameter: %v", store.Redact(u.String()), err)
	}
	if !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open(%s) = %v; want ErrInvalid, not ErrUnavailable", store.Redact(u.String()), err)
	}
}
