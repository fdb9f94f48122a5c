package keying

import (
	"encoding/base64"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewTokenFormat(t *testing.T) {
	tok, err := NewToken()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(tok), 22)
	assert.Len(t, tok, 43)
	assert.Regexp(t, `^[A-Za-z0-9_-]+$`, tok)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	require.NoError(t, err)
	assert.Len(t, raw, 32, "256 bits")
}

func TestNewTokenUnique(t *testing.T) {
	const goroutines, each = 8, 1250
	var mu sync.Mutex
	seen := make(map[string]struct{}, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			local := make([]string, 0, each)
			for range each {
				tok, err := NewToken()
				assert.NoError(t, err)
				local = append(local, tok)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, tok := range local {
				seen[tok] = struct{}{}
			}
		})
	}
	wg.Wait()
	assert.Len(t, seen, goroutines*each)
}
