package setup_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/setup"
	"github.com/idemkit/idemkit/store/memstore"
)

const keySecret = "0123456789abcdef0123456789abcdef-deploy" // 39 bytes

func TestFromEnvKeySecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(keySecret+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string][]string{
		"text": {"IDEMKIT_STORE=mem://", "IDEMKIT_KEY_SECRET=" + keySecret},
		"file": {"IDEMKIT_STORE=mem://", "IDEMKIT_KEY_SECRET_FILE=" + file},
	} {
		c, err := setup.FromEnv(env)
		if err != nil || !bytes.Equal(c.KeySecret, []byte(keySecret)) {
			t.Errorf("%s: FromEnv = %q, %v; want the secret", name, c.KeySecret, err)
		}
		if strings.Contains(c.String(), keySecret) || !strings.Contains(c.String(), "keyed digests") {
			t.Errorf("%s: String() = %q; want keyed digests named, the secret not", name, c.String())
		}
	}
	// A secret is used as it is: spaces count.
	c, err := setup.FromEnv([]string{"IDEMKIT_KEY_SECRET= " + keySecret + " "})
	if err != nil || string(c.KeySecret) != " "+keySecret+" " {
		t.Errorf("FromEnv trimmed the secret: %q, %v", c.KeySecret, err)
	}
	c, err = setup.FromEnv([]string{"IDEMKIT_STORE=mem://"})
	if err != nil || c.KeySecret != nil {
		t.Errorf("no secret variable: KeySecret = %q, %v; want nil", c.KeySecret, err)
	}
}

func TestKeySecretRefusals(t *testing.T) {
	short := keySecret[:idemkit.MinKeySecretLen-1]
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(keySecret), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string][]string{
		"short":   {"IDEMKIT_KEY_SECRET=" + short},
		"both":    {"IDEMKIT_KEY_SECRET=" + keySecret, "IDEMKIT_KEY_SECRET_FILE=" + file},
		"missing": {"IDEMKIT_KEY_SECRET_FILE=" + file + ".absent"},
	} {
		_, err := setup.FromEnv(env)
		if !errors.Is(err, setup.ErrConfig) || strings.Contains(err.Error(), short) {
			t.Errorf("%s: FromEnv = %v; want an ErrConfig without the secret", name, err)
		}
	}
	_, err := setup.Build(context.Background(), setup.Config{Store: "mem://", KeySecret: []byte(short)})
	if !errors.Is(err, setup.ErrConfig) || strings.Contains(err.Error(), short) {
		t.Errorf("Build with a short secret = %v; want an ErrConfig without the secret", err)
	}
}

// An engine from a stack with a key secret names its keys with it: the
// name differs from an unkeyed engine's and equals one keyed by hand.
func TestBuildKeySecretReachesTheEngine(t *testing.T) {
	ctx := context.Background()
	names := func(c setup.Config) string {
		st, err := setup.Build(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		e, err := st.NewEngine()
		if err != nil {
			t.Fatal(err)
		}
		d, err := e.KeyDigest("order-1", idemkit.WithScope("alice"))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	plain := names(setup.Config{Store: "mem://"})
	keyed := names(setup.Config{Store: "mem://", KeySecret: []byte(keySecret)})
	ms, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	e, err := idemkit.New(ms, idemkit.WithKeySecret([]byte(keySecret)))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := e.KeyDigest("order-1", idemkit.WithScope("alice"))
	if keyed == plain || keyed != want {
		t.Errorf("digest with the stack's secret = %s; unkeyed %s, keyed by hand %s", keyed, plain, want)
	}
}
