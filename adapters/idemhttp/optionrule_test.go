package idemhttp_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/keying"
)

// optionCase is a list of options given, with byUser first, to one
// constructor (ctor, Idempotency when empty): errs is nil when it accepts
// them, and otherwise what its error must say.
type optionCase struct {
	name, option, ctor string // option names the exported option the case covers
	opts               []idemhttp.Option
	errs               []string
}

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// when valid and refused, naming itself, when not; a nil option is
// refused by its position counted from 1; every error is reported, not
// only the first; every error wraps idemkit.ErrInvalid.
// TestOptionsRefusedOutsideTheirMode covers each option in each
// constructor.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	fp, err := keying.NewFingerprinter()
	if err != nil {
		t.Fatal(err)
	}
	cases := []optionCase{
		{name: "principal only"},
		{name: "principal twice", option: "WithPrincipal", opts: []idemhttp.Option{byUser}},
		{name: "nil principal", option: "WithPrincipal", opts: []idemhttp.Option{idemhttp.WithPrincipal(nil)}, errs: []string{"WithPrincipal: "}},
		{name: "key header", option: "WithKeyHeader", opts: []idemhttp.Option{idemhttp.WithKeyHeader("X-Key")}},
		{name: "bad key header", option: "WithKeyHeader", opts: []idemhttp.Option{idemhttp.WithKeyHeader("bad header")}, errs: []string{"WithKeyHeader: ", `"bad header"`}},
		{name: "key header elsewhere", option: "WithKeyHeader", ctor: "Window", opts: []idemhttp.Option{idemhttp.WithKeyHeader("X-Key")}, errs: []string{"WithKeyHeader: applies to Idempotency only, not Window"}},
		{name: "token header", option: "WithTokenHeader", ctor: "Token", opts: []idemhttp.Option{idemhttp.WithTokenHeader("X-Token")}},
		{name: "empty token header", option: "WithTokenHeader", ctor: "Token", opts: []idemhttp.Option{idemhttp.WithTokenHeader("")}, errs: []string{"WithTokenHeader: "}},
		{name: "methods", option: "WithMethods", opts: []idemhttp.Option{idemhttp.WithMethods(http.MethodPut)}},
		{name: "no methods", option: "WithMethods", opts: []idemhttp.Option{idemhttp.WithMethods()}, errs: []string{"WithMethods: "}},
		{name: "bad method", option: "WithMethods", opts: []idemhttp.Option{idemhttp.WithMethods("PO ST")}, errs: []string{"WithMethods: ", `"PO ST"`}},
		{name: "optional key", option: "WithOptionalKey", opts: []idemhttp.Option{idemhttp.WithOptionalKey()}},
		{name: "optional key elsewhere", option: "WithOptionalKey", ctor: "Token", opts: []idemhttp.Option{idemhttp.WithOptionalKey()}, errs: []string{"WithOptionalKey: applies to Idempotency only, not Token"}},
		{name: "store policy", option: "WithStorePolicy", opts: []idemhttp.Option{idemhttp.WithStorePolicy(idemhttp.StoreAll)}},
		{name: "nil store policy", option: "WithStorePolicy", opts: []idemhttp.Option{idemhttp.WithStorePolicy(nil)}, errs: []string{"WithStorePolicy: "}},
		{name: "replay headers", option: "WithReplayHeaders", opts: []idemhttp.Option{idemhttp.WithReplayHeaders("X-Order")}},
		{name: "bad replay headers", option: "WithReplayHeaders", opts: []idemhttp.Option{idemhttp.WithReplayHeaders("ok", "a:b")}, errs: []string{"WithReplayHeaders: ", `"a:b"`}},
		{name: "replay header replayed", option: "WithReplayHeaders", opts: []idemhttp.Option{idemhttp.WithReplayHeaders(idemhttp.ReplayedHeader)}, errs: []string{"WithReplayHeaders: ", "cannot be replayed"}},
		{name: "max body", option: "WithMaxBody", opts: []idemhttp.Option{idemhttp.WithMaxBody(10)}},
		{name: "zero max body", option: "WithMaxBody", opts: []idemhttp.Option{idemhttp.WithMaxBody(0)}, errs: []string{"WithMaxBody(0): "}},
		{name: "negative max body", option: "WithMaxBody", opts: []idemhttp.Option{idemhttp.WithMaxBody(-1)}, errs: []string{"WithMaxBody(-1): "}},
		{name: "max body without token field", option: "WithMaxBody", ctor: "Token", opts: []idemhttp.Option{idemhttp.WithMaxBody(10)}, errs: []string{"WithMaxBody: ", "WithTokenField"}},
		{name: "max stored", option: "WithMaxStoredResponse", opts: []idemhttp.Option{idemhttp.WithMaxStoredResponse(10)}},
		{name: "zero max stored", option: "WithMaxStoredResponse", opts: []idemhttp.Option{idemhttp.WithMaxStoredResponse(0)}, errs: []string{"WithMaxStoredResponse(0): "}},
		{name: "unstored", option: "WithUnstored", opts: []idemhttp.Option{idemhttp.WithUnstored(idemhttp.ReleaseKey, idemhttp.KeepTerminal)}},
		{name: "unknown unstored", option: "WithUnstored", opts: []idemhttp.Option{idemhttp.WithUnstored(idemhttp.ReleaseKey+1, idemhttp.KeepTerminal)}, errs: []string{"WithUnstored(2, 0): "}},
		{name: "query params", option: "WithQueryParams", opts: []idemhttp.Option{idemhttp.WithQueryParams("a")}},
		{name: "no query params", option: "WithQueryParams", ctor: "Window", opts: []idemhttp.Option{idemhttp.WithQueryParams()}},
		{name: "volatile", option: "WithVolatile", opts: []idemhttp.Option{idemhttp.WithVolatile("ts")}},
		{name: "bad volatile", option: "WithVolatile", opts: []idemhttp.Option{idemhttp.WithVolatile("items[]")}, errs: []string{"WithVolatile: "}},
		{name: "fingerprinter", option: "WithFingerprinter", ctor: "Window", opts: []idemhttp.Option{idemhttp.WithFingerprinter(fp)}},
		{name: "nil fingerprinter", option: "WithFingerprinter", opts: []idemhttp.Option{idemhttp.WithFingerprinter(nil)}, errs: []string{"WithFingerprinter: "}},
		{name: "fingerprinter with volatile", option: "WithFingerprinter", opts: []idemhttp.Option{idemhttp.WithFingerprinter(fp), idemhttp.WithVolatile("ts")}, errs: []string{"WithVolatile", "WithFingerprinter"}},
		{name: "engine options", option: "WithEngineOptions", ctor: "TokenIssuer", opts: []idemhttp.Option{idemhttp.WithEngineOptions(idemkit.WithRetryHint(time.Second))}},
		{name: "bad engine options", option: "WithEngineOptions", opts: []idemhttp.Option{idemhttp.WithEngineOptions(idemkit.WithLease(-1))}, errs: []string{"WithEngineOptions: "}},
		{name: "wait", option: "WithWait", ctor: "Token", opts: []idemhttp.Option{idemhttp.WithWait(0)}},
		{name: "negative wait", option: "WithWait", opts: []idemhttp.Option{idemhttp.WithWait(-time.Second)}, errs: []string{"WithWait(-1s): "}},
		{name: "logger", option: "WithLogger", opts: []idemhttp.Option{idemhttp.WithLogger(slog.Default())}},
		{name: "nil logger", option: "WithLogger", opts: []idemhttp.Option{idemhttp.WithLogger(nil)}, errs: []string{"WithLogger: "}},
		{name: "replay header", option: "WithReplayHeader", opts: []idemhttp.Option{idemhttp.WithReplayHeader("X-Replayed")}},
		{name: "empty replay header", option: "WithReplayHeader", opts: []idemhttp.Option{idemhttp.WithReplayHeader("")}, errs: []string{"WithReplayHeader: "}},
		{name: "token field", option: "WithTokenField", ctor: "Token", opts: []idemhttp.Option{idemhttp.WithTokenField("tok")}},
		{name: "empty token field", option: "WithTokenField", ctor: "Token", opts: []idemhttp.Option{idemhttp.WithTokenField("")}, errs: []string{"WithTokenField: "}},
		{name: "payload window", option: "WithPayloadWindow", opts: []idemhttp.Option{idemhttp.WithPayloadWindow(time.Minute)}},
		{name: "zero payload window", option: "WithPayloadWindow", opts: []idemhttp.Option{idemhttp.WithPayloadWindow(0)}, errs: []string{"WithPayloadWindow(0s): "}},
		{name: "problem base", option: "WithProblemBase", opts: []idemhttp.Option{idemhttp.WithProblemBase("https://example.test/p/")}},
		{name: "relative problem base", option: "WithProblemBase", opts: []idemhttp.Option{idemhttp.WithProblemBase("problems/")}, errs: []string{"WithProblemBase: "}},
		{name: "problem members", option: "WithProblemMembers", opts: []idemhttp.Option{idemhttp.WithProblemMembers(0)}},
		{name: "unknown problem members", option: "WithProblemMembers", opts: []idemhttp.Option{idemhttp.WithProblemMembers(idemhttp.DefaultProblemMembers + 1)}, errs: []string{"WithProblemMembers(0x8): "}},
		{name: "problem instance", option: "WithProblemInstance", opts: []idemhttp.Option{idemhttp.WithProblemInstance(idemhttp.UUIDInstance)}},
		{name: "nil problem instance", option: "WithProblemInstance", opts: []idemhttp.Option{idemhttp.WithProblemInstance(nil)}, errs: []string{"WithProblemInstance: "}},
		{name: "resume", option: "WithResume", opts: []idemhttp.Option{idemhttp.WithResume("order", "content-type", userHeader)}},
		{name: "resume elsewhere", option: "WithResume", ctor: "Window", opts: []idemhttp.Option{idemhttp.WithResume("order")}, errs: []string{"WithResume: applies to Idempotency only, not Window"}},
		{name: "resume twice", option: "WithResume", opts: []idemhttp.Option{idemhttp.WithResume("order"), idemhttp.WithResume("order")}, errs: []string{"WithResume: given twice"}},
		{name: "resume without name", option: "WithResume", opts: []idemhttp.Option{idemhttp.WithResume("")}, errs: []string{"WithResume: the operation name"}},
		{name: "resume bad header", option: "WithResume", opts: []idemhttp.Option{idemhttp.WithResume("order", "a:b")}, errs: []string{"WithResume: ", `"a:b"`}},
		{name: "resume credential", option: "WithResume", opts: []idemhttp.Option{idemhttp.WithResume("order", "authorization")}, errs: []string{"WithResume: header Authorization is a credential"}},
		{name: "resume key header", option: "WithResume", opts: []idemhttp.Option{idemhttp.WithKeyHeader("X-Key"), idemhttp.WithResume("order", "x-key")}, errs: []string{"WithResume: header X-Key is the idempotency key"}},
		{name: "resume body over a record", option: "WithResume", opts: []idemhttp.Option{idemhttp.WithResume("order"), idemhttp.WithMaxBody(1 << 20)}, errs: []string{"WithMaxBody(1048576): over the"}},
		{name: "resume smaller body", option: "WithResume", opts: []idemhttp.Option{idemhttp.WithResume("order"), idemhttp.WithMaxBody(1 << 10)}},
		{name: "include", option: "WithInclude", opts: []idemhttp.Option{idemhttp.WithInclude("amount", "items[].sku")}},
		{name: "include nothing", option: "WithInclude", opts: []idemhttp.Option{idemhttp.WithInclude()}, errs: []string{"WithInclude: no paths"}},
		{name: "bad include", option: "WithInclude", ctor: "Window", opts: []idemhttp.Option{idemhttp.WithInclude("a..b")}, errs: []string{"WithInclude", `"a..b"`}},
		{name: "include with fingerprinter", option: "WithInclude", opts: []idemhttp.Option{idemhttp.WithFingerprinter(fp), idemhttp.WithInclude("a")}, errs: []string{"WithInclude and WithFingerprinter"}},
		{name: "include elsewhere", option: "WithInclude", ctor: "Token", opts: []idemhttp.Option{idemhttp.WithInclude("a")}, errs: []string{"WithInclude: applies to Idempotency and Window only, not Token"}},
		{name: "key from JSON", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("data.id"))}},
		{name: "key from header", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromHeader("X-GitHub-Delivery"))}},
		{name: "key from query", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromQuery("event"))}},
		{name: "key from func", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromFunc(func(*http.Request, []byte) (string, error) { return "k", nil }))}},
		{name: "key from bad path", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("items[].id"))}, errs: []string{"WithKeyFrom: KeyFromJSON: ", `"items[].id"`}},
		{name: "key from bad header", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromHeader("a b"))}, errs: []string{"WithKeyFrom: KeyFromHeader: ", `"a b"`}},
		{name: "key from empty query", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromQuery(""))}, errs: []string{"WithKeyFrom: KeyFromQuery: "}},
		{name: "key from nil func", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromFunc(nil))}, errs: []string{"WithKeyFrom: KeyFromFunc: nil function"}},
		{name: "key from zero source", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeySource{})}, errs: []string{"WithKeyFrom: zero KeySource"}},
		{name: "key from twice", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromQuery("a")), idemhttp.WithKeyFrom(idemhttp.KeyFromQuery("b"))}, errs: []string{"WithKeyFrom: given twice"}},
		{name: "key from with key header", option: "WithKeyFrom", opts: []idemhttp.Option{idemhttp.WithKeyHeader("X-Key"), idemhttp.WithKeyFrom(idemhttp.KeyFromQuery("a"))}, errs: []string{"WithKeyFrom and WithKeyHeader"}},
		{name: "key from elsewhere", option: "WithKeyFrom", ctor: "Window", opts: []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromQuery("a"))}, errs: []string{"WithKeyFrom: applies to Idempotency only, not Window"}},
		{name: "callback", option: "Callback", opts: []idemhttp.Option{idemhttp.Callback(0), idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("id"))}},
		{name: "callback retention", option: "Callback", opts: []idemhttp.Option{idemhttp.Callback(30 * 24 * time.Hour)}},
		{name: "callback negative retention", option: "Callback", opts: []idemhttp.Option{idemhttp.Callback(-time.Hour)}, errs: []string{"Callback(-1h0m0s): negative retention"}},
		{name: "callback twice", option: "Callback", opts: []idemhttp.Option{idemhttp.Callback(0), idemhttp.Callback(time.Hour)}, errs: []string{"Callback: given twice"}},
		{name: "callback with store policy", option: "Callback", opts: []idemhttp.Option{idemhttp.WithStorePolicy(idemhttp.StoreAll), idemhttp.Callback(0)}, errs: []string{"Callback and WithStorePolicy"}},
		{name: "callback with optional key", option: "Callback", opts: []idemhttp.Option{idemhttp.Callback(0), idemhttp.WithOptionalKey()}, errs: []string{"Callback and WithOptionalKey"}},
		{name: "callback elsewhere", option: "Callback", ctor: "Window", opts: []idemhttp.Option{idemhttp.Callback(0)}, errs: []string{"Callback: applies to Idempotency only, not Window"}},
		{name: "nil", opts: []idemhttp.Option{nil}, errs: []string{"idemhttp: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []idemhttp.Option{nil, idemhttp.WithMaxBody(0), idemhttp.WithLogger(slog.Default()), idemhttp.WithLogger(nil), nil},
			errs: []string{"option 2 is nil", "WithMaxBody(0): ", "WithLogger: ", "option 6 is nil"}},
	}
	ctors := constructors(testkit.NewEngine(t))
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		if c.ctor == "" {
			c.ctor = "Idempotency"
		}
		err := ctors[c.ctor](append([]idemhttp.Option{byUser}, c.opts...)...)
		if c.errs == nil {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
}
