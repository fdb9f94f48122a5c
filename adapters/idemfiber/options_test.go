package idemfiber_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfiber"
	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/internal/testkit"
)

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// when valid and refused, naming itself, when not; a nil option is
// refused by its position counted from 1; every error is reported, not
// only the first; every error wraps idemkit.ErrInvalid.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	byUser := idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader))
	cases := []struct {
		name, option string // option names the exported option the case covers
		opts         []idemfiber.Option
		errs         []string // what New's error says, or nil when it accepts opts
	}{
		{name: "principal", option: "WithPrincipal", opts: []idemfiber.Option{byUser}},
		{name: "no principal", option: "WithPrincipal", errs: []string{"WithPrincipal is required"}},
		{name: "nil principal", option: "WithPrincipal", opts: []idemfiber.Option{idemfiber.WithPrincipal(nil)}, errs: []string{"WithPrincipal: "}},
		{name: "key header", option: "WithKeyHeader", opts: []idemfiber.Option{byUser, idemfiber.WithKeyHeader("X-Key")}},
		{name: "bad key header", option: "WithKeyHeader", opts: []idemfiber.Option{byUser, idemfiber.WithKeyHeader("bad header")}, errs: []string{"WithKeyHeader: ", `"bad header"`}},
		{name: "methods", option: "WithMethods", opts: []idemfiber.Option{byUser, idemfiber.WithMethods(http.MethodPut)}},
		{name: "no methods", option: "WithMethods", opts: []idemfiber.Option{byUser, idemfiber.WithMethods()}, errs: []string{"WithMethods: "}},
		{name: "bad method", option: "WithMethods", opts: []idemfiber.Option{byUser, idemfiber.WithMethods("PO ST")}, errs: []string{"WithMethods: ", `"PO ST"`}},
		{name: "optional key", option: "WithOptionalKey", opts: []idemfiber.Option{byUser, idemfiber.WithOptionalKey()}},
		{name: "replay headers", option: "WithReplayHeaders", opts: []idemfiber.Option{byUser, idemfiber.WithReplayHeaders("X-Order")}},
		{name: "bad replay header", option: "WithReplayHeaders", opts: []idemfiber.Option{byUser, idemfiber.WithReplayHeaders("a:b")}, errs: []string{"WithReplayHeaders: ", `"a:b"`}},
		{name: "cookie replayed", option: "WithReplayHeaders", opts: []idemfiber.Option{byUser, idemfiber.WithReplayHeaders("set-cookie")}, errs: []string{"WithReplayHeaders: ", "cannot be replayed"}},
		{name: "store policy", option: "WithStorePolicy", opts: []idemfiber.Option{byUser, idemfiber.WithStorePolicy(idemfiber.DefaultStorePolicy)}},
		{name: "nil store policy", option: "WithStorePolicy", opts: []idemfiber.Option{byUser, idemfiber.WithStorePolicy(nil)}, errs: []string{"WithStorePolicy: "}},
		{name: "max stored", option: "WithMaxStoredResponse", opts: []idemfiber.Option{byUser, idemfiber.WithMaxStoredResponse(1)}},
		{name: "zero max stored", option: "WithMaxStoredResponse", opts: []idemfiber.Option{byUser, idemfiber.WithMaxStoredResponse(0)}, errs: []string{"WithMaxStoredResponse(0): "}},
		{name: "volatile", option: "WithVolatile", opts: []idemfiber.Option{byUser, idemfiber.WithVolatile("ts")}},
		{name: "bad volatile", option: "WithVolatile", opts: []idemfiber.Option{byUser, idemfiber.WithVolatile("items[]")}, errs: []string{"WithVolatile: "}},
		{name: "engine options", option: "WithEngineOptions", opts: []idemfiber.Option{byUser, idemfiber.WithEngineOptions(idemkit.WithRetryHint(time.Second))}},
		{name: "bad engine options", option: "WithEngineOptions", opts: []idemfiber.Option{byUser, idemfiber.WithEngineOptions(idemkit.WithLease(-1))}, errs: []string{"WithEngineOptions: "}},
		{name: "logger", option: "WithLogger", opts: []idemfiber.Option{byUser, idemfiber.WithLogger(slog.Default())}},
		{name: "nil logger", option: "WithLogger", opts: []idemfiber.Option{byUser, idemfiber.WithLogger(nil)}, errs: []string{"WithLogger: "}},
		{name: "include", option: "WithInclude", opts: []idemfiber.Option{byUser, idemfiber.WithInclude("amount")}},
		{name: "include nothing", option: "WithInclude", opts: []idemfiber.Option{byUser, idemfiber.WithInclude()}, errs: []string{"WithInclude: no paths"}},
		{name: "bad include", option: "WithInclude", opts: []idemfiber.Option{byUser, idemfiber.WithInclude("a..b")}, errs: []string{"WithInclude", `"a..b"`}},
		{name: "key from JSON", option: "WithKeyFrom", opts: []idemfiber.Option{byUser, idemfiber.WithKeyFrom(idemfiber.KeyFromJSON("data.id"))}},
		{name: "key from bad path", option: "WithKeyFrom", opts: []idemfiber.Option{byUser, idemfiber.WithKeyFrom(idemfiber.KeyFromJSON("a[].id"))}, errs: []string{"WithKeyFrom: KeyFromJSON: ", `"a[].id"`}},
		{name: "key from bad header", option: "WithKeyFrom", opts: []idemfiber.Option{byUser, idemfiber.WithKeyFrom(idemfiber.KeyFromHeader("a b"))}, errs: []string{"WithKeyFrom: KeyFromHeader: "}},
		{name: "key from empty query", option: "WithKeyFrom", opts: []idemfiber.Option{byUser, idemfiber.WithKeyFrom(idemfiber.KeyFromQuery(""))}, errs: []string{"WithKeyFrom: KeyFromQuery: "}},
		{name: "key from nil func", option: "WithKeyFrom", opts: []idemfiber.Option{byUser, idemfiber.WithKeyFrom(idemfiber.KeyFromFunc(nil))}, errs: []string{"WithKeyFrom: KeyFromFunc: "}},
		{name: "key from zero", option: "WithKeyFrom", opts: []idemfiber.Option{byUser, idemfiber.WithKeyFrom(idemfiber.KeySource{})}, errs: []string{"WithKeyFrom: zero KeySource"}},
		{name: "key from twice", option: "WithKeyFrom", opts: []idemfiber.Option{byUser, idemfiber.WithKeyFrom(idemfiber.KeyFromQuery("a")), idemfiber.WithKeyFrom(idemfiber.KeyFromQuery("b"))}, errs: []string{"WithKeyFrom: given twice"}},
		{name: "key from with key header", option: "WithKeyFrom", opts: []idemfiber.Option{byUser, idemfiber.WithKeyHeader("X-K"), idemfiber.WithKeyFrom(idemfiber.KeyFromQuery("a"))}, errs: []string{"WithKeyFrom and WithKeyHeader"}},
		{name: "callback", option: "Callback", opts: []idemfiber.Option{byUser, idemfiber.Callback(0)}},
		{name: "callback negative", option: "Callback", opts: []idemfiber.Option{byUser, idemfiber.Callback(-time.Hour)}, errs: []string{"Callback(-1h0m0s): "}},
		{name: "callback twice", option: "Callback", opts: []idemfiber.Option{byUser, idemfiber.Callback(0), idemfiber.Callback(0)}, errs: []string{"Callback: given twice"}},
		{name: "callback with store policy", option: "Callback", opts: []idemfiber.Option{byUser, idemfiber.Callback(0), idemfiber.WithStorePolicy(idemfiber.DefaultStorePolicy)}, errs: []string{"Callback and WithStorePolicy"}},
		{name: "callback with optional key", option: "Callback", opts: []idemfiber.Option{byUser, idemfiber.WithOptionalKey(), idemfiber.Callback(0)}, errs: []string{"Callback and WithOptionalKey"}},
		{name: "nil", opts: []idemfiber.Option{byUser, nil}, errs: []string{"idemfiber: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []idemfiber.Option{nil, byUser, idemfiber.WithMaxStoredResponse(-1), idemfiber.WithLogger(nil), nil},
			errs: []string{"option 1 is nil", "WithMaxStoredResponse(-1): ", "WithLogger: ", "option 5 is nil"}},
	}
	e := testkit.NewEngine(t)
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		_, err := idemfiber.New(e, c.opts...)
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
