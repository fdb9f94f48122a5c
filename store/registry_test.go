package store_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

const secret = "s3cr3t-PASS"

func init() {
	store.Register("testdown", func(_ context.Context, u *url.URL) (store.Store, error) {
		p := store.NewParams(u)
		if _, _, err := p.String("mode"); err != nil {
			return nil, err
		}
		if err := p.Done(); err != nil {
			return nil, err
		}
		return storetest.Unavailable(), nil
	})
}

func TestOpenUsesTheRegisteredScheme(t *testing.T) {
	s, err := store.Open(context.Background(), "testdown://host?mode=x")
	if err != nil || s == nil {
		t.Fatalf("Open = %v, %v", s, err)
	}
	if got := store.Schemes(); !strings.Contains(strings.Join(got, ","), "testdown") {
		t.Fatalf("Schemes() = %v", got)
	}
}

func TestOpenRefusalsNameTheProblemButNoSecret(t *testing.T) {
	cases := map[string]struct {
		url  string
		want string
		is   error
	}{
		"unknown scheme":    {"nosuch://u:" + secret + "@h/", `"nosuch"`, store.ErrUnknownScheme},
		"slash in password": {"testdown://:" + secret + "/x@h/", "invalid port", store.ErrInvalid},
		"lone user name":    {"nosuch://" + secret + "@h/", `"nosuch"`, store.ErrUnknownScheme},
		"host:port":         {"localhost:" + secret, `"localhost"`, store.ErrUnknownScheme},
		"no scheme":         {"/var/lib/idem.db", "needs a scheme", store.ErrInvalid},
		"unparsable":        {"testdown://u:" + secret + "@h:port/%zz", "invalid", store.ErrInvalid},
		"unknown parameter": {"testdown://u:" + secret + "@h/?modee=1&password=" + secret, "modee", store.ErrInvalid},
		"repeated":          {"testdown://h/?mode=1&mode=2", `"mode" given 2 times`, store.ErrInvalid},
	}
	for name, c := range cases {
		_, err := store.Open(context.Background(), c.url)
		if !errors.Is(err, c.is) {
			t.Errorf("%s: Open = %v, want %v", name, err, c.is)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q does not name %q", name, err, c.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error leaks the secret: %q", name, err)
		}
	}
}

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"redis://:" + secret + "@h:6379/0":                                     "redis://:xxxxx@h:6379/0",
		"redis://user:" + secret + "@h/?sentinel_password=" + secret + "&db=1": "redis://user:xxxxx@h/?db=1&sentinel_password=xxxxx",
		"bolt:///var/lib/idem.db":                                              "bolt:///var/lib/idem.db",
		"redis://" + secret + "@h:6379":                                        "redis://xxxxx@h:6379",
		// Every parameter named like a password is hidden, whatever the
		// backend calls it (libpq's sslpassword, a misspelt passwrd).
		"postgres://u@h/db?sslpassword=" + secret + "&sslmode=verify-full": "postgres://xxxxx@h/db?sslmode=verify-full&sslpassword=xxxxx",
		"redis+sentinel://h/m?Data_Password=" + secret:                     "redis+sentinel://h/m?Data_Password=xxxxx",
		"mysql://h/db?passwrd=" + secret + "&pwd=" + secret:                "mysql://h/db?passwrd=xxxxx&pwd=xxxxx",
		"redis://h/?api_token=" + secret + "&client_secret=" + secret:      "redis://h/?api_token=xxxxx&client_secret=xxxxx",
		"redis://h:" + secret + "x/%zz":                                    "redis://<unparsable URL>",
		secret:                                                             secret,
	}
	for in, want := range cases {
		if got := store.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedactKeepsURLWithoutHostAsGiven: a URL written with "//" and no
// host keeps its "//" (mem:// stays mem://, not the mem: net/url writes
// back), its scheme in lower case; one written without keeps none.
func TestRedactKeepsURLWithoutHostAsGiven(t *testing.T) {
	for in, want := range map[string]string{
		"mem://":                     "mem://",
		"MEM://":                     "mem://",
		"mem://?capacity=500":        "mem://?capacity=500",
		"mem://?token=" + secret:     "mem://?token=xxxxx",
		"mem:":                       "mem:",
		"mem:?capacity=500":          "mem:?capacity=500",
		"bolt:///var/lib/idem.db":    "bolt:///var/lib/idem.db",
		"redis://:" + secret + "@/0": "redis://:xxxxx@/0",
	} {
		if got := store.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRegisterPanicsOnMistakes(t *testing.T) {
	open := func(context.Context, *url.URL) (store.Store, error) { return nil, nil }
	for name, f := range map[string]func(){
		"duplicate":  func() { store.Register("testdown", open) },
		"nil opener": func() { store.Register("other", nil) },
		"bad scheme": func() { store.Register("Bad Scheme", open) },
		"empty":      func() { store.Register("", open) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			f()
		}()
	}
}
