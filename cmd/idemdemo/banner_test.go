package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The banner shows the store URL as given, its password hidden: mem://
// stays mem://, not the mem: that net/url writes back (issue 28, item 7e).
func TestBannerShowsStoreURLAsGiven(t *testing.T) {
	for rawURL, want := range map[string]string{
		"mem://":              "store: mem://, on store error: closed",
		"mem://?capacity=500": "store: mem://?capacity=500, on store error: closed",
		"bolt://" + t.TempDir() + "/d.db?nosync=true": ".db?nosync=true, on store error: closed",
	} {
		cfg := defaultConfig()
		cfg.stack.Store = rawURL
		cfg.addr = "127.0.0.1:0"
		svc := startTestService(t, cfg)
		assert.Contains(t, "store: "+svc.backend.describe(), want, rawURL)
	}
	cfg := defaultConfig()
	cfg.stack.Store = "bolt://" + t.TempDir() + "/f.db?nosync=true"
	cfg.stack.Fallback = "mem://"
	cfg.addr = "127.0.0.1:0"
	svc := startTestService(t, cfg)
	assert.Contains(t, svc.backend.describe(), ", fallback mem://", "the fallback URL as given too")
}
