package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/setup"
	"github.com/idemkit/idemkit/store/memstore"
)

const ctlSecret = "3q2+7wLmQ0r5yQ8pXh1mZ0b7cVt4sN6kA9eU2dJ0fGg=" // the text of `openssl rand -base64 32`

func ctlEnv(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

// TestKeySecretFindsKeysOfASecretEngine: keys a service wrote with
// idemkit.WithKeySecret are found by idemctl given the same secret
// (IDEMKIT_KEY_SECRET, or a file by IDEMKIT_KEY_SECRET_FILE or
// -key-secret-file), and not without it; the digest idemctl prints is the
// one the service's logs show; a short secret is a usage error that does
// not print it.
func TestKeySecretFindsKeysOfASecretEngine(t *testing.T) {
	url := seedWith(t, idemkit.WithKeySecret([]byte(ctlSecret)))
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(ctlSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"env":       {env: map[string]string{setup.EnvKeySecret: ctlSecret}},
		"env file":  {env: map[string]string{setup.EnvKeySecretFile: file}},
		"flag file": {args: []string{"-key-secret-file", file}},
	} {
		args := append(append([]string{"-store", url}, c.args...), "get", "-scope", user, doneKey)
		code, out, errOut := ctlEnv(t, c.env, args...)
		if code != exitOK || !strings.Contains(out, "completed") {
			t.Fatalf("%s: get = %d\n%s%s", name, code, out, errOut)
		}
		noSecrets(t, out, errOut)
		if strings.Contains(out+errOut, ctlSecret) {
			t.Fatalf("%s: output holds the secret", name)
		}
		mem, _ := memstore.New()
		e, _ := idemkit.New(mem, idemkit.WithKeySecret([]byte(ctlSecret)))
		want, _ := e.KeyDigest(doneKey, idemkit.WithScope(user))
		mem.Close()
		if !strings.Contains(out, want) {
			t.Fatalf("%s: get prints no log digest %s:\n%s", name, want, out)
		}
	}
	if code, out, errOut := ctlEnv(t, nil, "-store", url, "get", "-scope", user, doneKey); code != exitNotFound {
		t.Fatalf("without the secret get = %d, want %d\n%s%s", code, exitNotFound, out, errOut)
	}
	code, out, errOut := ctlEnv(t, map[string]string{setup.EnvKeySecret: "short-secret"}, "-store", url, "get", "-scope", user, doneKey)
	if code != exitUsage || strings.Contains(out+errOut, "short-secret") {
		t.Fatalf("a short secret = %d, want %d without the secret in the output\n%s%s", code, exitUsage, out, errOut)
	}
	code, _, errOut = ctlEnv(t, map[string]string{setup.EnvKeySecret: ctlSecret, setup.EnvKeySecretFile: file}, "-store", url, "get", doneKey)
	if code != exitUsage {
		t.Fatalf("both a secret and a file = %d, want %d\n%s", code, exitUsage, errOut)
	}
}
