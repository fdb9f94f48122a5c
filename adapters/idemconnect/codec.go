package idemconnect

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// A stored response, or a stored final error, is a stored response of the
// shared HTTP format (httpcore) with status 200:
//
//   - a response: the header typeHeader with the message's full type name,
//     then the response headers, then each trailer under its name with
//     http.TrailerPrefix; the body is the message's wire bytes;
//   - a final error: the error's metadata as headers; the body is a
//     google.rpc.Status with the code, message and details.
//
// The names typeHeader and "Trailer:..." cannot be real header names
// (':' is not in a token), so they never meet the handler's headers.
const typeHeader = ":message"

var errCorrupt = errors.New("idemconnect: corrupt stored response")

// errCorruptError is what DecodeError returns for a stored error it
// cannot decode; the interceptor does not mark it replayed.
var errCorruptError = connect.NewError(connect.CodeInternal, errors.New("idemconnect: corrupt stored error"))

// encodeResponse stores a response: its message, which must be of type
// want, and its headers and trailers, with those the handler set through
// the call info (header, trailer).
func encodeResponse(resp connect.AnyResponse, header, trailer http.Header, want protoreflect.FullName) ([]byte, error) {
	m, ok := resp.Any().(proto.Message)
	if !ok {
		return nil, fmt.Errorf("idemconnect: response is %T, not a proto.Message", resp.Any())
	}
	if name := m.ProtoReflect().Descriptor().FullName(); name != want {
		return nil, fmt.Errorf("idemconnect: response is a %s, but WithProcedure gave %s", name, want)
	}
	body, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("idemconnect: marshal response %s: %w", want, err)
	}
	b := httpcore.StartResponse(make([]byte, 0, 64+len(body)), http.StatusOK)
	b = httpcore.AppendHeader(b, typeHeader, []string{string(want)})
	n := 1
	b, n = appendHeaders(b, n, "", resp.Header(), header)
	b, n = appendHeaders(b, n, http.TrailerPrefix, resp.Trailer(), trailer)
	return httpcore.FinishResponse(b, 0, n, body), nil
}

// appendHeaders appends the values of both headers, merged, in the order
// of their names, each name with prefix; n counts the headers.
func appendHeaders(b []byte, n int, prefix string, h1, h2 http.Header) ([]byte, int) {
	if len(h1)+len(h2) == 0 {
		return b, n
	}
	names := slices.Sorted(maps.Keys(h1))
	for name := range h2 {
		if _, ok := h1[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		vs := slices.Concat(h1[name], h2[name])
		if len(vs) == 0 {
			continue
		}
		b = httpcore.AppendHeader(b, prefix+name, vs)
		n++
	}
	return b, n
}

// decodeResponse rebuilds a stored response of proc.
func decodeResponse(data []byte, proc procedure) (connect.AnyResponse, error) {
	r, err := httpcore.Decode(data)
	if err != nil || r.Headers == 0 {
		return nil, errCorrupt
	}
	if name := r.Field(); string(name) != typeHeader || r.Count() != 1 {
		return nil, errCorrupt
	}
	if name := string(r.Field()); name != string(proc.response) {
		return nil, fmt.Errorf("idemconnect: the stored response is a %s, the procedure now responds with %s", name, proc.response)
	}
	resp, err := proc.decode(r.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errCorrupt, proc.response, err)
	}
	for range r.Headers - 1 {
		name := string(r.Field())
		h := resp.Header()
		if t, ok := strings.CutPrefix(name, http.TrailerPrefix); ok {
			name, h = t, resp.Trailer()
		}
		for range r.Count() {
			h[name] = append(h[name], string(r.Field()))
		}
	}
	return resp, nil
}

// errorCodec is the engine ErrorCodec of the unary interceptor: errors
// whose code is final are stored and replayed as the same code, message,
// details and metadata.
type errorCodec map[connect.Code]bool

// EncodeError implements idemkit.ErrorCodec.
func (ec errorCodec) EncodeError(err error) ([]byte, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) || !ec[ce.Code()] {
		return nil, false
	}
	st := &spb.Status{Code: int32(ce.Code()), Message: strings.ToValidUTF8(ce.Message(), "\uFFFD")}
	for _, d := range ce.Details() {
		st.Details = append(st.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
	}
	body, merr := proto.Marshal(st)
	if merr != nil {
		return nil, false
	}
	b := httpcore.StartResponse(nil, http.StatusOK)
	b, n := appendHeaders(b, 0, "", ce.Meta(), nil)
	return httpcore.FinishResponse(b, 0, n, body), true
}

// DecodeError implements idemkit.ErrorCodec.
func (ec errorCodec) DecodeError(data []byte) error {
	r, err := httpcore.Decode(data)
	st := &spb.Status{}
	if err != nil || proto.Unmarshal(r.Body, st) != nil || st.GetCode() <= 0 || st.GetCode() > int32(connect.CodeUnauthenticated) {
		// Final errors are never OK: one that decodes so is corrupt, and
		// must not replay as a success without a response.
		return errCorruptError
	}
	ce := connect.NewError(connect.Code(st.GetCode()), errors.New(st.GetMessage()))
	for _, a := range st.GetDetails() {
		d, derr := connect.NewErrorDetail(a)
		if derr != nil {
			return errCorruptError
		}
		ce.AddDetail(d)
	}
	for range r.Headers {
		name := string(r.Field())
		for range r.Count() {
			ce.Meta()[name] = append(ce.Meta()[name], string(r.Field()))
		}
	}
	return ce
}
