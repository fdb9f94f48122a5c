package sqlstore_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
)

// TestOpenURLRefusesSemicolon opens each SQL scheme with a query holding
// a ';': Go's url.Query drops such a pair without a word, so
// ?table=atk_idem;x&create_table=true created and used the default table.
// Open must refuse it with an error wrapping store.ErrInvalid that names
// the ';' and not the password.
func TestOpenURLRefusesSemicolon(t *testing.T) {
	const secret = "s3cr3t-pw"
	pgURL, err := url.Parse(pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	pgURL.User = url.UserPassword("postgres", secret)
	myURL := mysqlURL(t)
	myURL.User = url.UserPassword(myURL.User.Username(), secret)
	for _, base := range []*url.URL{pgURL, withScheme(pgURL, "postgresql"), myURL} {
		for _, q := range []string{
			"table=atk_idem;x&create_table=true",
			"create_table=true&table=atk_idem&max_open=4;x",
			"sslpassword=" + secret + ";x&table=atk_idem",
		} {
			u := *base
			if u.RawQuery != "" {
				q = u.RawQuery + "&" + q
			}
			u.RawQuery = q
			s, err := store.Open(t.Context(), u.String())
			if err == nil {
				s.(store.Closer).Close()
				t.Errorf("Open(%s) succeeded", store.Redact(u.String()))
				continue
			}
			if !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrUnavailable) {
				t.Errorf("Open(%s) = %v; want ErrInvalid, not ErrUnavailable", store.Redact(u.String()), err)
			}
			if !strings.Contains(err.Error(), "';'") || strings.Contains(err.Error(), secret) {
				t.Errorf("Open(%s): %v; want an error naming the ';', without the password", store.Redact(u.String()), err)
			}
		}
	}
}
