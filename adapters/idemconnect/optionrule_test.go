package idemconnect_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/internal/testkit"
)

func constPrincipal(context.Context, http.Header) (string, error) { return "p", nil }

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// by its side's constructor when valid and refused, naming itself, when
// not, when given twice where it would replace, or when given to the
// other side; a nil option is refused by its position counted from 1;
// every error is reported, not only the first; every error wraps
// idemkit.ErrInvalid.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	e := testkit.NewEngine(t)
	sel := idemconnect.WithProcedure[structpb.Struct](procCreate)
	pr := idemconnect.WithPrincipal(constPrincipal)
	cases := []struct {
		name, option string
		client       bool // NewClient rather than NewServer
		opts         []idemconnect.Option
		errs         []string // what the error says, or nil when accepted
	}{
		{name: "server", option: "WithPrincipal", opts: []idemconnect.Option{sel, pr}},
		{name: "nil principal", option: "WithPrincipal", opts: []idemconnect.Option{sel, idemconnect.WithPrincipal(nil)}, errs: []string{"WithPrincipal(nil): "}},
		{name: "principal twice", option: "WithPrincipal", opts: []idemconnect.Option{sel, pr, pr}, errs: []string{"WithPrincipal: given twice"}},
		{name: "principal on the client", option: "WithPrincipal", client: true, opts: []idemconnect.Option{sel, pr}, errs: []string{"WithPrincipal applies to NewServer only"}},
		{name: "no principal", option: "WithPrincipal", opts: []idemconnect.Option{sel}, errs: []string{"no principal function"}},
		{name: "procedures", option: "WithProcedure", client: true, opts: []idemconnect.Option{sel, idemconnect.WithProcedure[structpb.Value]("/a.B/C")}},
		{name: "bad procedure", option: "WithProcedure", client: true, opts: []idemconnect.Option{idemconnect.WithProcedure[structpb.Struct]("Create"), idemconnect.WithProcedure[structpb.Struct]("/a.B/")},
			errs: []string{`WithProcedure("Create"): `, `WithProcedure("/a.B/"): `}},
		{name: "procedure twice", option: "WithProcedure", opts: []idemconnect.Option{sel, pr, idemconnect.WithProcedure[structpb.Value](procCreate)},
			errs: []string{`WithProcedure("/test.Orders/Create"): given twice`}},
		{name: "no procedure", option: "WithProcedure", opts: []idemconnect.Option{pr}, errs: []string{"no procedure selected"}},
		{name: "key header", option: "WithKeyHeader", client: true, opts: []idemconnect.Option{sel, idemconnect.WithKeyHeader("X-Request-Key")}},
		{name: "reserved key header", option: "WithKeyHeader", client: true, opts: []idemconnect.Option{sel, idemconnect.WithKeyHeader("Grpc-Key")},
			errs: []string{`WithKeyHeader("Grpc-Key"): `}},
		{name: "binary key header", option: "WithKeyHeader", opts: []idemconnect.Option{sel, pr, idemconnect.WithKeyHeader("key-bin")},
			errs: []string{`WithKeyHeader("key-bin"): `}},
		{name: "key header not a token", option: "WithKeyHeader", opts: []idemconnect.Option{sel, pr, idemconnect.WithKeyHeader("a key")},
			errs: []string{`WithKeyHeader("a key"): `}},
		{name: "key header twice", option: "WithKeyHeader", opts: []idemconnect.Option{sel, pr, idemconnect.WithKeyHeader("X-A"), idemconnect.WithKeyHeader("X-B")},
			errs: []string{"WithKeyHeader: given twice"}},
		{name: "optional key", option: "WithOptionalKey", opts: []idemconnect.Option{sel, pr, idemconnect.WithOptionalKey()}},
		{name: "optional key on the client", option: "WithOptionalKey", client: true, opts: []idemconnect.Option{sel, idemconnect.WithOptionalKey()},
			errs: []string{"WithOptionalKey applies to NewServer only"}},
		{name: "final codes", option: "WithFinalCodes", opts: []idemconnect.Option{sel, pr, idemconnect.WithFinalCodes(connect.CodeNotFound)}},
		{name: "final code 0", option: "WithFinalCodes", opts: []idemconnect.Option{sel, pr, idemconnect.WithFinalCodes(connect.CodeNotFound, 0)},
			errs: []string{"WithFinalCodes(code_0): "}},
		{name: "final out of range", option: "WithFinalCodes", opts: []idemconnect.Option{sel, pr, idemconnect.WithFinalCodes(connect.Code(99))},
			errs: []string{"WithFinalCodes(code_99): "}},
		{name: "final codes twice", option: "WithFinalCodes", opts: []idemconnect.Option{sel, pr, idemconnect.WithFinalCodes(), idemconnect.WithFinalCodes()},
			errs: []string{"WithFinalCodes: given twice"}},
		{name: "engine options", option: "WithEngineOptions", opts: []idemconnect.Option{sel, pr, idemconnect.WithEngineOptions(idemkit.WithLease(time.Minute))}},
		{name: "bad engine option", option: "WithEngineOptions", opts: []idemconnect.Option{sel, pr, idemconnect.WithEngineOptions(idemkit.WithLease(-time.Second))},
			errs: []string{"WithEngineOptions: ", "WithLease(-1s)"}},
		{name: "error codec in the engine options", option: "WithEngineOptions", opts: []idemconnect.Option{sel, pr, idemconnect.WithEngineOptions(idemkit.WithErrorCodec(idemkit.FinalErrors()))},
			errs: []string{"WithEngineOptions: ", "WithErrorCodec: given twice"}},
		{name: "engine options on the client", option: "WithEngineOptions", client: true, opts: []idemconnect.Option{sel, idemconnect.WithEngineOptions()},
			errs: []string{"WithEngineOptions applies to NewServer only"}},
		{name: "retries", option: "WithRetries", client: true, opts: []idemconnect.Option{sel, idemconnect.WithRetries(3)}},
		{name: "negative retries", option: "WithRetries", client: true, opts: []idemconnect.Option{sel, idemconnect.WithRetries(-1)}, errs: []string{"WithRetries(-1): "}},
		{name: "retries twice", option: "WithRetries", client: true, opts: []idemconnect.Option{sel, idemconnect.WithRetries(1), idemconnect.WithRetries(2)}, errs: []string{"WithRetries: given twice"}},
		{name: "retries on the server", option: "WithRetries", opts: []idemconnect.Option{sel, pr, idemconnect.WithRetries(1)}, errs: []string{"WithRetries applies to NewClient only"}},
		{name: "backoff", option: "WithBackoff", client: true, opts: []idemconnect.Option{sel, idemconnect.WithBackoff(time.Millisecond, time.Second)}},
		{name: "max below base", option: "WithBackoff", client: true, opts: []idemconnect.Option{sel, idemconnect.WithBackoff(time.Second, time.Millisecond)},
			errs: []string{"WithBackoff(1s, 1ms): "}},
		{name: "backoff twice", option: "WithBackoff", client: true, opts: []idemconnect.Option{sel, idemconnect.WithBackoff(time.Millisecond, time.Second), idemconnect.WithBackoff(time.Millisecond, time.Second)},
			errs: []string{"WithBackoff: given twice"}},
		{name: "fence header", option: "WithFenceHeader", client: true, opts: []idemconnect.Option{sel, idemconnect.WithFenceHeader(idemconnect.FenceHeader)}},
		{name: "reserved fence header", option: "WithFenceHeader", client: true, opts: []idemconnect.Option{sel, idemconnect.WithFenceHeader("Connect-Fence")},
			errs: []string{`WithFenceHeader("Connect-Fence"): `}},
		{name: "fence header the key", option: "WithFenceHeader", client: true, opts: []idemconnect.Option{sel, idemconnect.WithFenceHeader("idempotency-key")},
			errs: []string{`WithFenceHeader("Idempotency-Key"): `, "carries the idempotency key"}},
		{name: "fence header the set key", option: "WithFenceHeader", client: true, opts: []idemconnect.Option{sel, idemconnect.WithFenceHeader("x-key"), idemconnect.WithKeyHeader("X-Key")},
			errs: []string{`WithFenceHeader("X-Key"): `}},
		{name: "fence header twice", option: "WithFenceHeader", client: true, opts: []idemconnect.Option{sel, idemconnect.WithFenceHeader("X-F"), idemconnect.WithFenceHeader("X-F")},
			errs: []string{"WithFenceHeader: given twice"}},
		{name: "fence header on the server", option: "WithFenceHeader", opts: []idemconnect.Option{sel, pr, idemconnect.WithFenceHeader("X-F")},
			errs: []string{"WithFenceHeader applies to NewClient only"}},
		{name: "nil", client: true, opts: []idemconnect.Option{sel, nil}, errs: []string{"option 2 is nil"}},
		{name: "every error", opts: []idemconnect.Option{nil, idemconnect.WithPrincipal(nil), sel, idemconnect.WithRetries(1), nil},
			errs: []string{"option 1 is nil", "WithPrincipal(nil): ", "WithRetries applies to NewClient only", "option 5 is nil"}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		var err error
		var made bool
		if c.client {
			cl, cerr := idemconnect.NewClient(c.opts...)
			made, err = cl != nil, cerr
		} else {
			s, serr := idemconnect.NewServer(e, c.opts...)
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
	if _, err := idemconnect.NewServer(nil, sel, pr); err == nil {
		t.Error("NewServer(nil engine) accepted")
	}
}
