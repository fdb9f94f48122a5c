package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// TestUpstreamCredentialsAreRefusedUnprinted: user information in the
// upstream URL would never be sent (the ReverseProxy drops it) and was
// printed in the startup log and in config errors. It is refused, with an
// error that names neither the password nor the user.
func TestUpstreamCredentialsAreRefusedUnprinted(t *testing.T) {
	const password = "hunter2-upstream-pw"
	for _, upstream := range []string{
		"http://alice:" + password + "@127.0.0.1:9000",
		"https://" + password + "@127.0.0.1:9000/base",
		"http://alice:" + password + "@[::1", // not a URL at all
		"ftp://alice:" + password + "@127.0.0.1:9000",
	} {
		for name, args := range map[string][]string{
			"flag": {"-upstream", upstream},
			"file": {"-config", writeConfig(t, "upstream = \""+upstream+"\"\n")},
		} {
			var stderr bytes.Buffer
			// Accepted, the proxy would serve until ctx ends.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := run(ctx, append(args, "-store", "mem://", "-listen", "127.0.0.1:0"), noEnv, &stderr, nil)
			cancel()
			if !errors.Is(err, errConfig) {
				t.Fatalf("%s %s: %v, want a configuration error", name, upstream, err)
			}
			if all := err.Error() + stderr.String(); strings.Contains(all, password) || strings.Contains(all, "alice") {
				t.Errorf("%s: the credentials appear in the error or log: %s", name, all)
			}
		}
	}
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExampleConfigStatesTheDefaults: every setting example.toml gives
// for a key the code has a default for (the top level, the JWT leeway
// and claim) is that default, so the file documents what an omitted key
// means.
func TestExampleConfigStatesTheDefaults(t *testing.T) {
	var ex config
	if _, err := toml.DecodeFile("example.toml", &ex); err != nil {
		t.Fatal(err)
	}
	def := defaults()
	def.Principal.JWT.Claim = "sub" // the default check() fills in for source = "jwt"
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"namespace", ex.Namespace, def.Namespace},
		{"health_path", ex.HealthPath, def.HealthPath},
		{"metrics_path", ex.MetricsPath, def.MetricsPath},
		{"max_body", ex.MaxBody, def.MaxBody},
		{"upstream_timeout", ex.UpstreamTimeout, def.UpstreamTimeout},
		{"store_budget", ex.StoreBudget, def.StoreBudget},
		{"shutdown_timeout", ex.ShutdownTimeout, def.ShutdownTimeout},
		{"log_level", ex.LogLevel, def.LogLevel},
		{"listen", ex.Listen, def.Listen},
		{"read_header_timeout", ex.ReadHeaderTimeout, def.ReadHeaderTimeout},
		{"body_timeout", ex.BodyTimeout, def.BodyTimeout},
		{"case_sensitive_paths", ex.CaseSensitivePaths, def.CaseSensitivePaths},
		{"principal.jwt.leeway", ex.Principal.JWT.Leeway, def.Principal.JWT.Leeway},
		{"principal.jwt.claim", ex.Principal.JWT.Claim, def.Principal.JWT.Claim},
	} {
		if f.got != f.want {
			t.Errorf("example.toml %s = %v, but the default is %v", f.name, f.got, f.want)
		}
	}
}
