package idemconnect

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

func TestResponseRoundTrip(t *testing.T) {
	var cfg config
	cfg.procs = map[string]procedure{}
	if err := WithProcedure[structpb.Struct]("/a.B/C")(&cfg); err != nil {
		t.Fatal(err)
	}
	proc := cfg.procs["/a.B/C"]
	msg, err := structpb.NewStruct(map[string]any{"a": "b"})
	if err != nil {
		t.Fatal(err)
	}
	resp := connect.NewResponse(msg)
	resp.Header().Add("X-A", "1")
	resp.Header().Add("X-A", "2")
	resp.Trailer().Set("X-T", "t")
	b, err := encodeResponse(resp, http.Header{"X-Info": {"i"}, "X-A": {"3"}}, http.Header{"X-T2": {"u"}}, proc.response)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeResponse(b, proc)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.Any().(proto.Message), msg) {
		t.Errorf("message %v, want %v", got.Any(), msg)
	}
	for h, want := range map[string][]string{"X-A": {"1", "2", "3"}, "X-Info": {"i"}} {
		if g := got.Header().Values(h); !slices.Equal(g, want) {
			t.Errorf("header %s: %q, want %q", h, g, want)
		}
	}
	for h, want := range map[string][]string{"X-T": {"t"}, "X-T2": {"u"}} {
		if g := got.Trailer().Values(h); !slices.Equal(g, want) {
			t.Errorf("trailer %s: %q, want %q", h, g, want)
		}
	}
	if _, err := encodeResponse(connect.NewResponse(&structpb.Value{}), nil, nil, proc.response); err == nil {
		t.Error("a response of another type than WithProcedure's was encoded")
	}
}

func TestCorruptResponseRefused(t *testing.T) {
	var cfg config
	cfg.procs = map[string]procedure{}
	if err := WithProcedure[structpb.Struct]("/a.B/C")(&cfg); err != nil {
		t.Fatal(err)
	}
	proc := cfg.procs["/a.B/C"]
	noType := httpcore.FinishResponse(httpcore.StartResponse(nil, 200), 0, 0, nil)
	wrongFirst := httpcore.FinishResponse(httpcore.AppendHeader(httpcore.StartResponse(nil, 200), "X-A", []string{"google.protobuf.Struct"}), 0, 1, nil)
	badBody := httpcore.FinishResponse(httpcore.AppendHeader(httpcore.StartResponse(nil, 200), typeHeader, []string{"google.protobuf.Struct"}), 0, 1, []byte{0xff, 0xff})
	for name, b := range map[string][]byte{
		"empty": nil, "terminal": httpcore.TerminalRecord(httpcore.ReasonTooLarge), "no type": noType,
		"wrong first header": wrongFirst, "bad message": badBody,
	} {
		if _, err := decodeResponse(b, proc); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: %v, want errCorrupt", name, err)
		}
	}
}

func TestFinalErrorRoundTrip(t *testing.T) {
	ec := errorCodec(finalSet(DefaultFinalCodes()))
	ce := connect.NewError(connect.CodeNotFound, errors.New("no such order \xff"))
	d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: "R"})
	if err != nil {
		t.Fatal(err)
	}
	ce.AddDetail(d)
	ce.Meta().Add("X-M", "1")
	ce.Meta().Add("X-M", "2")
	b, ok := ec.EncodeError(ce)
	if !ok {
		t.Fatal("a final error was not encoded")
	}
	var got *connect.Error
	if !errors.As(ec.DecodeError(b), &got) {
		t.Fatal("not a *connect.Error")
	}
	if got.Code() != connect.CodeNotFound || got.Message() != "no such order \uFFFD" {
		t.Errorf("%v, want not_found: no such order \uFFFD", got)
	}
	if len(got.Details()) != 1 {
		t.Fatalf("%d details", len(got.Details()))
	}
	if v, err := got.Details()[0].Value(); err != nil || v.(*errdetails.ErrorInfo).GetReason() != "R" {
		t.Errorf("detail %v, %v", v, err)
	}
	if g := got.Meta().Values("X-M"); !slices.Equal(g, []string{"1", "2"}) {
		t.Errorf("meta %q", g)
	}
	if _, ok := ec.EncodeError(connect.NewError(connect.CodeInternal, errors.New("x"))); ok {
		t.Error("a code that is not final was encoded")
	}
	if _, ok := ec.EncodeError(errors.New("plain")); ok {
		t.Error("an error without a code was encoded")
	}
	zero := httpcore.FinishResponse(httpcore.StartResponse(nil, 200), 0, 0, nil) // code 0: OK
	for name, b := range map[string][]byte{"empty": nil, "code 0": zero, "garbage": {1, 2, 3}} {
		if err := ec.DecodeError(b); err != errCorruptError {
			t.Errorf("%s: %v, want errCorruptError", name, err)
		}
	}
}
