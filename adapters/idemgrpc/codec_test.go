package idemgrpc

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestResponseRoundTrip(t *testing.T) {
	for _, m := range []proto.Message{
		wrapperspb.String("hello"),
		&structpb.Struct{},
		&errdetails.ErrorInfo{Reason: "R", Metadata: map[string]string{"a": "b"}},
	} {
		b, err := encodeResponse(m)
		require.NoError(t, err)
		got, err := decodeResponse(b, protoregistry.GlobalTypes)
		require.NoError(t, err)
		assert.True(t, proto.Equal(m, got), "%v", m)
	}
}

func TestDecodeResponseRefusesBadData(t *testing.T) {
	good, err := encodeResponse(wrapperspb.String("x"))
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"empty":          {},
		"unknown format": append([]byte{9}, good[1:]...),
		"name too long":  {formatResponse, 200, 'a'},
		"bad varint":     {formatResponse, 0xff},
		"bad message":    append(append([]byte(nil), good[:1+1+len("google.protobuf.StringValue")]...), 0x0a, 0x05, 'a'),
	} {
		_, err := decodeResponse(b, protoregistry.GlobalTypes)
		assert.ErrorIs(t, err, errCorrupt, name)
	}
	_, err = decodeResponse(good, new(protoregistry.Types))
	assert.ErrorIs(t, err, protoregistry.NotFound, "type not in the resolver")
}

func TestStatusCodec(t *testing.T) {
	sc := statusCodec{codes.NotFound: true}
	_, final := sc.EncodeError(status.Error(codes.Internal, "x"))
	assert.False(t, final)
	_, final = sc.EncodeError(errors.New("no status"))
	assert.False(t, final, "errors without a status are never final")

	st, err := status.New(codes.NotFound, "gone").WithDetails(&errdetails.ResourceInfo{ResourceName: "o/1"})
	require.NoError(t, err)
	b, final := sc.EncodeError(st.Err())
	require.True(t, final)
	assert.True(t, proto.Equal(st.Proto(), status.Convert(sc.DecodeError(b)).Proto()))

	assert.Equal(t, codes.Internal, status.Code(sc.DecodeError([]byte{7})), "corrupt")
	assert.Equal(t, codes.Internal, status.Code(sc.DecodeError(nil)))
}

// A stored status that decodes to code OK is corrupt: it must replay as
// Internal, never as a nil error (a success with no response).
func TestStatusCodecStoredOKIsCorrupt(t *testing.T) {
	sc := statusCodec{codes.NotFound: true}
	err := sc.DecodeError([]byte{formatStatus})
	require.Error(t, err)
	assert.Equal(t, codes.Internal, status.Code(err))
}

// Whatever bytes a store hands back, decoding a stored response or status
// never panics, and a status is never OK.
func FuzzDecodeStored(f *testing.F) {
	good, err := encodeResponse(status.New(codes.NotFound, "x").Proto())
	require.NoError(f, err)
	st, _ := statusCodec{codes.NotFound: true}.EncodeError(status.Error(codes.NotFound, "gone"))
	for _, seed := range [][]byte{nil, {formatResponse}, good, st, {formatResponse, 0xff, 0xff, 0xff}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = decodeResponse(data, protoregistry.GlobalTypes)
		err := statusCodec{}.DecodeError(data)
		require.Error(t, err)
		require.NotEqual(t, codes.OK, status.Code(err))
	})
}

// Whatever a handler returns, what is stored decodes to what the client
// got: a response of any bytes (lengths at every uvarint width), and a
// final status of any message with details, invalid UTF-8 included.
func FuzzStoredRoundTrip(f *testing.F) {
	for _, n := range []int{0, 1, 127, 128, 255, 256, 16383, 16384, 70000} {
		f.Add(bytes.Repeat([]byte{'v'}, n))
	}
	f.Add([]byte("no customer \xff\xfe"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range []proto.Message{wrapperspb.Bytes(data), wrapperspb.String(strings.ToValidUTF8(string(data), "?"))} {
			b, err := encodeResponse(m)
			require.NoError(t, err)
			got, err := decodeResponse(b, protoregistry.GlobalTypes)
			require.NoError(t, err)
			require.True(t, proto.Equal(m, got))
		}

		sc := statusCodec{codes.FailedPrecondition: true}
		st, err := status.New(codes.FailedPrecondition, string(data)).WithDetails(wrapperspb.Bytes(data))
		require.NoError(t, err)
		b, final := sc.EncodeError(st.Err())
		require.True(t, final, "a final status is always stored")
		got := status.Convert(sc.DecodeError(b))
		require.Equal(t, codes.FailedPrecondition, got.Code())
		require.Equal(t, strings.ToValidUTF8(string(data), "\uFFFD") == string(data), got.Message() == string(data))
		require.True(t, utf8.ValidString(got.Message()))
		require.Len(t, got.Details(), 1)
		require.True(t, proto.Equal(wrapperspb.Bytes(data), got.Details()[0].(proto.Message)))
	})
}
