package idemgrpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/internal/testkit"
)

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// by its side's constructor when valid and refused, naming itself, when
// not or when given to the other side; a nil option is refused by its
// position counted from 1; every error is reported, not only the first;
// every error wraps store.ErrInvalid (idemkit.ErrInvalid).
func TestOptionsFollowTheOptionRule(t *testing.T) {
	e := testkit.NewEngine(t)
	sel := idemgrpc.WithMethods(methodCreate)
	pr := idemgrpc.WithPrincipal(constPrincipal)
	selector := func(context.Context, string) bool { return true }
	cases := []struct {
		name, option string // option names the exported option the case covers
		client       bool   // NewClient rather than NewServer
		opts         []idemgrpc.Option
		errs         []string // what the error says, or nil when the options are accepted
	}{
		{name: "server", option: "WithPrincipal", opts: []idemgrpc.Option{sel, pr}},
		{name: "nil principal", option: "WithPrincipal", opts: []idemgrpc.Option{sel, idemgrpc.WithPrincipal(nil)}, errs: []string{"WithPrincipal(nil): "}},
		{name: "principal on the client", option: "WithPrincipal", client: true, opts: []idemgrpc.Option{sel, pr}, errs: []string{"WithPrincipal applies to NewServer only"}},
		{name: "methods", option: "WithMethods", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithMethods("/a.B/C", "/a.B/D")}},
		{name: "bad methods", option: "WithMethods", client: true, opts: []idemgrpc.Option{idemgrpc.WithMethods("Create", "/a.B/")},
			errs: []string{`WithMethods("Create"): `, `WithMethods("/a.B/"): `}},
		{name: "selector", option: "WithSelector", opts: []idemgrpc.Option{pr, idemgrpc.WithSelector(selector)}},
		{name: "nil selector", option: "WithSelector", opts: []idemgrpc.Option{pr, idemgrpc.WithSelector(nil)}, errs: []string{"WithSelector(nil): "}},
		{name: "metadata key", option: "WithMetadataKey", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithMetadataKey("X-Request-Key")}},
		{name: "binary metadata key", option: "WithMetadataKey", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithMetadataKey("key-bin")},
			errs: []string{`WithMetadataKey("key-bin"): `}},
		{name: "optional key", option: "WithOptionalKey", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithOptionalKey()}},
		{name: "optional key on the client", option: "WithOptionalKey", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithOptionalKey()},
			errs: []string{"WithOptionalKey applies to NewServer only"}},
		{name: "final codes", option: "WithFinalCodes", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithFinalCodes(codes.NotFound)}},
		{name: "final OK", option: "WithFinalCodes", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithFinalCodes(codes.NotFound, codes.OK)},
			errs: []string{"WithFinalCodes(OK): "}},
		{name: "final out of range", option: "WithFinalCodes", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithFinalCodes(codes.Code(99))},
			errs: []string{"WithFinalCodes(Code(99)): "}},
		{name: "engine options", option: "WithEngineOptions", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithEngineOptions(idemkit.WithLease(time.Minute))}},
		{name: "bad engine option", option: "WithEngineOptions", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithEngineOptions(idemkit.WithLease(-time.Second))},
			errs: []string{"WithEngineOptions: ", "WithLease(-1s)"}},
		{name: "error codec in the engine options", option: "WithEngineOptions", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithEngineOptions(idemkit.WithErrorCodec(idemkit.FinalErrors()))},
			errs: []string{"WithEngineOptions: ", "WithErrorCodec: given twice"}},
		{name: "engine options on the client", option: "WithEngineOptions", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithEngineOptions()},
			errs: []string{"WithEngineOptions applies to NewServer only"}},
		{name: "type resolver", option: "WithTypeResolver", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithTypeResolver(protoregistry.GlobalTypes)}},
		{name: "nil type resolver", option: "WithTypeResolver", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithTypeResolver(nil)}, errs: []string{"WithTypeResolver(nil): "}},
		{name: "retries", option: "WithRetries", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithRetries(3)}},
		{name: "negative retries", option: "WithRetries", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithRetries(-1)}, errs: []string{"WithRetries(-1): "}},
		{name: "retries on the server", option: "WithRetries", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithRetries(1)}, errs: []string{"WithRetries applies to NewClient only"}},
		{name: "backoff", option: "WithBackoff", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithBackoff(time.Millisecond, time.Second)}},
		{name: "max below base", option: "WithBackoff", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithBackoff(time.Second, time.Millisecond)},
			errs: []string{"WithBackoff(1s, 1ms): "}},
		{name: "fence metadata", option: "WithFenceMetadata", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithFenceMetadata("X-Fence")}},
		{name: "binary fence metadata", option: "WithFenceMetadata", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithFenceMetadata("fence-bin")},
			errs: []string{`WithFenceMetadata("fence-bin"): `}},
		{name: "reserved fence metadata", option: "WithFenceMetadata", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithFenceMetadata("grpc-fence")},
			errs: []string{`WithFenceMetadata("grpc-fence"): `}},
		{name: "fence metadata the key", option: "WithFenceMetadata", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithFenceMetadata("Idempotency-Key")},
			errs: []string{`WithFenceMetadata("Idempotency-Key"): `, "idempotency-key"}},
		{name: "fence metadata the set key", option: "WithFenceMetadata", client: true, opts: []idemgrpc.Option{sel, idemgrpc.WithFenceMetadata("x-key"), idemgrpc.WithMetadataKey("X-Key")},
			errs: []string{`WithFenceMetadata("x-key"): `}},
		{name: "fence metadata on the server", option: "WithFenceMetadata", opts: []idemgrpc.Option{sel, pr, idemgrpc.WithFenceMetadata("x-fence")},
			errs: []string{"WithFenceMetadata applies to NewClient only"}},
		{name: "nil", client: true, opts: []idemgrpc.Option{sel, nil}, errs: []string{"idemgrpc: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []idemgrpc.Option{nil, idemgrpc.WithPrincipal(nil), sel, idemgrpc.WithRetries(1), nil},
			errs: []string{"option 1 is nil", "WithPrincipal(nil): ", "WithRetries applies to NewClient only", "option 5 is nil"}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		var err error
		var made bool
		if c.client {
			cl, cerr := idemgrpc.NewClient(c.opts...)
			made, err = cl != nil, cerr
		} else {
			s, serr := idemgrpc.NewServer(e, c.opts...)
			made, err = s != nil, serr
		}
		if c.errs == nil {
			if err != nil || !made {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		if made {
			t.Errorf("%s: a value returned with its error", c.name)
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
}
