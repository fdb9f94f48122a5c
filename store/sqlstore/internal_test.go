package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
)

// TestOpenWithoutDriver checks the error of a URL whose driver the
// program did not import: ErrInvalid, naming the import, without the
// password.
func TestOpenWithoutDriver(t *testing.T) {
	u, _ := url.Parse("postgres://app:s3cret@localhost/app")
	_, err := openURL(context.Background(), u, Postgres, "no-such-driver", `_ "example.com/driver"`, "dsn", urlOpts{})
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), `_ "example.com/driver"`) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("openURL without the driver = %v; want ErrInvalid naming the import, without the password", err)
	}
}

func TestMySQLNumber(t *testing.T) {
	base := errors.New("Error 1213 (40001): Deadlock found when trying to get lock")
	for _, err := range []error{
		base,
		fmt.Errorf("op: %w", base),
		fmt.Errorf("op: %w: %w", store.ErrUnavailable, base),
	} {
		if n, ok := mysqlNumber(err); !ok || n != 1213 {
			t.Errorf("mysqlNumber(%v) = %d, %v; want 1213", err, n, ok)
		}
		if !retryable(err) || !unavailable(err) {
			t.Errorf("%v: retryable %v, unavailable %v; want both", err, retryable(err), unavailable(err))
		}
	}
	if _, ok := mysqlNumber(errors.New("Error: something")); ok {
		t.Error("mysqlNumber found a number in a text without one")
	}
}

func TestServerVersions(t *testing.T) {
	for _, tc := range []struct {
		version         string
		returning, skip bool
	}{
		{"10.11.19-MariaDB-0+deb12u1", true, true},
		{"10.5.2-MariaDB", true, false},
		{"10.4.30-MariaDB-log", false, false},
		{"11.4.2-MariaDB", true, true},
		{"8.0.36", false, true},
		{"8.0.0-dmr", false, false},
		{"5.7.44-log", false, false},
	} {
		if got := mariaDBAtLeast(tc.version, 10, 5); got != tc.returning {
			t.Errorf("%s: RETURNING %v, want %v", tc.version, got, tc.returning)
		}
		if got := mysqlSkipLocked(tc.version); got != tc.skip {
			t.Errorf("%s: SKIP LOCKED %v, want %v", tc.version, got, tc.skip)
		}
	}
}

func TestKeyRefHidesKey(t *testing.T) {
	const key = "user:alice:card"
	if r := keyRef(key); strings.Contains(r, "alice") || r == keyRef(key+"x") {
		t.Errorf("keyRef(%q) = %q", key, r)
	}
}

func TestSchemaNames(t *testing.T) {
	stmts, err := Schema(MySQL, "idem.records")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stmts[0], "CREATE TABLE IF NOT EXISTS `idem`.`records` (") || !strings.Contains(stmts[0], "INDEX `records_expires_at` (expires_at)") {
		t.Errorf("MySQL schema:\n%s", stmts[0])
	}
	long := strings.Repeat("a", 63)
	if n := indexName(long); len(n) > 63 {
		t.Errorf("index name of a 63-byte table has %d bytes", len(n))
	}
}

// TestScanPageInQueries keeps the LIMIT of the scan statements equal to
// scanPage, which decides when a scan has read its last page.
func TestScanPageInQueries(t *testing.T) {
	for _, d := range []*dialect{&postgres, &mysql} {
		for _, q := range []string{d.scan, d.scanBounded} {
			if !strings.HasSuffix(q, fmt.Sprintf("LIMIT %d", scanPage)) {
				t.Errorf("%s scan statement does not end in LIMIT %d: %s", d.name, scanPage, q)
			}
		}
	}
	if got := prefixEnd([]byte("a\xff\xff")); string(got) != "b" {
		t.Errorf("prefixEnd(a\\xff\\xff) = %q, want \"b\"", got)
	}
	if got := prefixEnd([]byte("\xff")); got != nil {
		t.Errorf("prefixEnd(\\xff) = %q, want nil", got)
	}
}
