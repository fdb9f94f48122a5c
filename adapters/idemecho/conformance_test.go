package idemecho_test

import (
	"testing"

	"github.com/idemkit/idemkit/adapters/internal/httpconform"
)

// TestContract runs the HTTP contract every idemkit adapter keeps through
// Echo's own server on a loopback port.
func TestContract(t *testing.T) { httpconform.Run(t, serve) }
