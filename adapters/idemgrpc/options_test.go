package idemgrpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/keying"
)

func constPrincipal(context.Context) (string, error) { return "p", nil }

// Every invalid configuration is refused by the constructor, with an error
// wrapping idemkit.ErrInvalid that names the problem, instead of failing
// every call later.
func TestNewServerRefusesInvalidOptions(t *testing.T) {
	e := testkit.NewEngine(t)
	selected := idemgrpc.WithMethods(methodCreate)
	principal := idemgrpc.WithPrincipal(constPrincipal)
	cases := map[string]struct {
		e    *idemkit.Engine
		opts []idemgrpc.Option
		want string
	}{
		"nil engine":         {nil, []idemgrpc.Option{selected, principal}, "nil engine"},
		"no principal":       {e, []idemgrpc.Option{selected}, "WithPrincipal"},
		"nil principal":      {e, []idemgrpc.Option{selected, idemgrpc.WithPrincipal(nil)}, "nil principal"},
		"no selection":       {e, []idemgrpc.Option{principal}, "no method selected"},
		"no leading slash":   {e, []idemgrpc.Option{principal, idemgrpc.WithMethods("test.Orders/Create")}, "not a full method name"},
		"short name":         {e, []idemgrpc.Option{principal, idemgrpc.WithMethods("Create")}, "not a full method name"},
		"dotted":             {e, []idemgrpc.Option{principal, idemgrpc.WithMethods("/test.Orders.Create")}, "not a full method name"},
		"empty method":       {e, []idemgrpc.Option{principal, idemgrpc.WithMethods("/test.Orders/")}, "not a full method name"},
		"nil selector":       {e, []idemgrpc.Option{principal, idemgrpc.WithSelector(nil)}, "nil selector"},
		"empty key name":     {e, []idemgrpc.Option{selected, principal, idemgrpc.WithMetadataKey("")}, "metadata key"},
		"binary key name":    {e, []idemgrpc.Option{selected, principal, idemgrpc.WithMetadataKey("key-bin")}, "metadata key"},
		"reserved key name":  {e, []idemgrpc.Option{selected, principal, idemgrpc.WithMetadataKey("grpc-key")}, "metadata key"},
		"key name with sp":   {e, []idemgrpc.Option{selected, principal, idemgrpc.WithMetadataKey("key name")}, "metadata key"},
		"nil resolver":       {e, []idemgrpc.Option{selected, principal, idemgrpc.WithTypeResolver(nil)}, "type resolver"},
		"final OK":           {e, []idemgrpc.Option{selected, principal, idemgrpc.WithFinalCodes(codes.NotFound, codes.OK)}, "final error code"},
		"final out of range": {e, []idemgrpc.Option{selected, principal, idemgrpc.WithFinalCodes(codes.Code(99))}, "final error code"},
		"nil option":         {e, []idemgrpc.Option{selected, principal, nil}, "nil"},
		"client option":      {e, []idemgrpc.Option{selected, principal, idemgrpc.WithRetries(2)}, "WithRetries applies to NewClient only"},
		"negative lease":     {e, []idemgrpc.Option{selected, principal, idemgrpc.WithEngineOptions(idemkit.WithLease(-time.Second))}, "WithLease(-1s)"},
		"engine namespace":   {e, []idemgrpc.Option{selected, principal, idemgrpc.WithEngineOptions(idemkit.WithNamespace("other"))}, "WithNamespace is set per engine"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := idemgrpc.NewServer(tc.e, tc.opts...)
			require.ErrorIs(t, err, idemkit.ErrInvalid)
			assert.ErrorContains(t, err, tc.want)
			assert.Nil(t, s)
		})
	}
}

// All the configuration errors are reported at once, not one per attempt.
func TestNewServerReportsEveryError(t *testing.T) {
	_, err := idemgrpc.NewServer(nil, idemgrpc.WithMethods("Create"), idemgrpc.WithBackoff(0, 0))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	for _, want := range []string{"nil engine", "not a full method name", "WithBackoff applies to NewClient only", "WithPrincipal"} {
		assert.ErrorContains(t, err, want)
	}
}

func TestNewClientRefusesInvalidOptions(t *testing.T) {
	selected := idemgrpc.WithMethods(methodCreate)
	cases := map[string]struct {
		opts []idemgrpc.Option
		want string
	}{
		"no selection":     {nil, "no method selected"},
		"malformed method": {[]idemgrpc.Option{idemgrpc.WithMethods("test.Orders/Create")}, "not a full method name"},
		"negative retries": {[]idemgrpc.Option{selected, idemgrpc.WithRetries(-1)}, "negative retry count"},
		"zero backoff":     {[]idemgrpc.Option{selected, idemgrpc.WithBackoff(0, time.Second)}, "backoff"},
		"max below base":   {[]idemgrpc.Option{selected, idemgrpc.WithBackoff(time.Second, time.Millisecond)}, "backoff"},
		"bad key name":     {[]idemgrpc.Option{selected, idemgrpc.WithMetadataKey("x-key-bin")}, "metadata key"},
		"server principal": {[]idemgrpc.Option{selected, idemgrpc.WithPrincipal(constPrincipal)}, "WithPrincipal applies to NewServer only"},
		"server optional":  {[]idemgrpc.Option{selected, idemgrpc.WithOptionalKey()}, "WithOptionalKey applies to NewServer only"},
		"server final":     {[]idemgrpc.Option{selected, idemgrpc.WithFinalCodes(codes.NotFound)}, "WithFinalCodes applies to NewServer only"},
		"server engine":    {[]idemgrpc.Option{selected, idemgrpc.WithEngineOptions()}, "WithEngineOptions applies to NewServer only"},
		"server resolver":  {[]idemgrpc.Option{selected, idemgrpc.WithTypeResolver(nil)}, "WithTypeResolver applies to NewServer only"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := idemgrpc.NewClient(tc.opts...)
			require.ErrorIs(t, err, idemkit.ErrInvalid)
			assert.ErrorContains(t, err, tc.want)
			assert.Nil(t, c)
		})
	}
}

// The gRPC names are the shared ones in lower case (metadata keys are).
func TestNamesAreTheSharedOnes(t *testing.T) {
	if idemgrpc.DefaultMetadataKey != strings.ToLower(keying.KeyHeader) ||
		idemgrpc.ReplayedHeader != strings.ToLower(keying.ReplayedHeader) ||
		idemgrpc.MaxKeyLen != keying.MaxKeyLen {
		t.Fatalf("idemgrpc's names drifted from keying's: %q %q %d", idemgrpc.DefaultMetadataKey, idemgrpc.ReplayedHeader, idemgrpc.MaxKeyLen)
	}
}
