package idemkit_test

import (
	"testing"

	"github.com/idemkit/idemkit"
)

var benchSecret = idemkit.WithKeySecret([]byte("0123456789abcdef0123456789abcdef"))

func BenchmarkStoreKeySecret(b *testing.B) { benchStoreKey(b, benchSecret) }

func BenchmarkDoReplayScopedSecret(b *testing.B) { benchDoReplayScoped(b, benchSecret) }
