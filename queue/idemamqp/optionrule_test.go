package idemamqp_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemamqp"
)

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// when valid and refused, naming itself, when not; a nil option is
// refused by its position counted from 1; every error is reported, not
// only the first; every error wraps store.ErrInvalid (idemkit.ErrInvalid).
func TestOptionsFollowTheOptionRule(t *testing.T) {
	e := testkit.NewEngine(t)
	conn := dial(t)
	fn := func(context.Context, *amqp.Delivery) ([]byte, error) { return nil, nil }
	key := func(*amqp.Delivery) (string, error) { return "k", nil }
	final := func(error) bool { return false }
	report := func(context.Context, *amqp.Delivery, idemamqp.Outcome) {}
	cases := []struct {
		name, option string // option names the exported option the case covers
		opts         []idemamqp.Option
		errs         []string // what NewHandler's error says, or nil when it accepts opts
	}{
		{name: "none"},
		{name: "key", option: "WithKey", opts: []idemamqp.Option{idemamqp.WithKey(key)}},
		{name: "nil key", option: "WithKey", opts: []idemamqp.Option{idemamqp.WithKey(nil)}, errs: []string{"WithKey(nil): "}},
		{name: "body key", option: "WithBodyKey", opts: []idemamqp.Option{idemamqp.WithBodyKey("data.order_id")}},
		{name: "body key through arrays", option: "WithBodyKey", opts: []idemamqp.Option{idemamqp.WithBodyKey("items[].id")}, errs: []string{"WithBodyKey: ", `"items[].id"`}},
		{name: "bad body key", option: "WithBodyKey", opts: []idemamqp.Option{idemamqp.WithBodyKey("a..b")}, errs: []string{"WithBodyKey: ", `"a..b"`}},
		{name: "include", option: "WithInclude", opts: []idemamqp.Option{idemamqp.WithInclude("amount", "items[].sku")}},
		{name: "include nothing", option: "WithInclude", opts: []idemamqp.Option{idemamqp.WithInclude()}, errs: []string{"WithInclude: no paths"}},
		{name: "bad include", option: "WithInclude", opts: []idemamqp.Option{idemamqp.WithInclude("a..b")}, errs: []string{"WithInclude: ", `"a..b"`}},
		{name: "include with fingerprint", option: "WithInclude", opts: []idemamqp.Option{idemamqp.WithInclude("a"), idemamqp.WithFingerprint(key)}, errs: []string{"cannot be combined with WithFingerprint"}},
		{name: "volatile", option: "WithVolatile", opts: []idemamqp.Option{idemamqp.WithVolatile("sent_at")}},
		{name: "volatile nothing", option: "WithVolatile", opts: []idemamqp.Option{idemamqp.WithVolatile()}, errs: []string{"WithVolatile: no paths"}},
		{name: "bad volatile", option: "WithVolatile", opts: []idemamqp.Option{idemamqp.WithVolatile("a[")}, errs: []string{"WithVolatile: ", `"a["`}},
		{name: "fingerprint", option: "WithFingerprint", opts: []idemamqp.Option{idemamqp.WithFingerprint(key)}},
		{name: "nil fingerprint", option: "WithFingerprint", opts: []idemamqp.Option{idemamqp.WithFingerprint(nil)}, errs: []string{"WithFingerprint(nil): "}},
		{name: "error codec", option: "WithErrorCodec", opts: []idemamqp.Option{idemamqp.WithErrorCodec(idemkit.FinalErrors())}},
		{name: "nil error codec", option: "WithErrorCodec", opts: []idemamqp.Option{idemamqp.WithErrorCodec(nil)}, errs: []string{"WithErrorCodec(nil): "}},
		{name: "final", option: "WithFinal", opts: []idemamqp.Option{idemamqp.WithFinal(final)}},
		{name: "nil final", option: "WithFinal", opts: []idemamqp.Option{idemamqp.WithFinal(nil)}, errs: []string{"WithFinal(nil): "}},
		{name: "retry delay", option: "WithRetryDelay", opts: []idemamqp.Option{idemamqp.WithRetryDelay(0)}},
		{name: "negative retry delay", option: "WithRetryDelay", opts: []idemamqp.Option{idemamqp.WithRetryDelay(-time.Second)}, errs: []string{"WithRetryDelay(-1s): "}},
		{name: "backoff", option: "WithBackoff", opts: []idemamqp.Option{idemamqp.WithBackoff(time.Millisecond, time.Second)}},
		{name: "max under first", option: "WithBackoff", opts: []idemamqp.Option{idemamqp.WithBackoff(time.Second, time.Millisecond)}, errs: []string{"WithBackoff(1s, 1ms): "}},
		{name: "max attempts", option: "WithMaxAttempts", opts: []idemamqp.Option{idemamqp.WithMaxAttempts(1)}},
		{name: "zero max attempts", option: "WithMaxAttempts", opts: []idemamqp.Option{idemamqp.WithMaxAttempts(0)}, errs: []string{"WithMaxAttempts(0): "}},
		{name: "report", option: "WithReport", opts: []idemamqp.Option{idemamqp.WithReport(report)}},
		{name: "nil report", option: "WithReport", opts: []idemamqp.Option{idemamqp.WithReport(nil)}, errs: []string{"WithReport(nil): "}},
		{name: "logger", option: "WithLogger", opts: []idemamqp.Option{idemamqp.WithLogger(slog.Default())}},
		{name: "nil logger", option: "WithLogger", opts: []idemamqp.Option{idemamqp.WithLogger(nil)}, errs: []string{"WithLogger(nil): "}},
		{name: "engine options", option: "WithEngineOptions", opts: []idemamqp.Option{idemamqp.WithEngineOptions(idemkit.WithLease(time.Minute))}},
		{name: "bad engine option", option: "WithEngineOptions", opts: []idemamqp.Option{idemamqp.WithEngineOptions(idemkit.WithLease(0))}, errs: []string{"WithEngineOptions: ", "WithLease(0s): must be at least 3ms"}},
		{name: "error codec in the engine options too", option: "WithErrorCodec", opts: []idemamqp.Option{idemamqp.WithErrorCodec(idemkit.FinalErrors()), idemamqp.WithEngineOptions(idemkit.WithErrorCodec(idemkit.FinalErrors()))},
			errs: []string{"WithEngineOptions: ", "WithErrorCodec: given twice"}},
		{name: "error codec in the engine options only", option: "WithEngineOptions", opts: []idemamqp.Option{idemamqp.WithEngineOptions(idemkit.WithErrorCodec(idemkit.FinalErrors()))}},
		{name: "retry queue", option: "WithRetryQueue", opts: []idemamqp.Option{idemamqp.WithRetryQueue(conn, "orders")}},
		{name: "nil retry connection", option: "WithRetryQueue", opts: []idemamqp.Option{idemamqp.WithRetryQueue(nil, "orders")}, errs: []string{"WithRetryQueue(nil, \"orders\"): "}},
		{name: "no retry queue name", option: "WithRetryQueue", opts: []idemamqp.Option{idemamqp.WithRetryQueue(conn, "")}, errs: []string{"WithRetryQueue(conn, \"\"): "}},
		{name: "retry queue name too long", option: "WithRetryQueue", opts: []idemamqp.Option{idemamqp.WithRetryQueue(conn, strings.Repeat("q", 250))}, errs: []string{"WithRetryQueue(conn, \"qqq", "too long"}},
		{name: "nil", opts: []idemamqp.Option{idemamqp.WithMaxAttempts(3), nil}, errs: []string{"idemamqp: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []idemamqp.Option{nil, idemamqp.WithKey(nil), idemamqp.WithMaxAttempts(3), idemamqp.WithLogger(nil), nil},
			errs: []string{"option 1 is nil", "WithKey(nil): ", "WithLogger(nil): ", "option 5 is nil"}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		h, err := idemamqp.NewHandler(e, "n", fn, c.opts...)
		if c.errs == nil {
			if err != nil || h == nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		if h != nil {
			t.Errorf("%s: a Handler returned with its error", c.name)
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
}
