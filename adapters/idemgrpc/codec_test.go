package idemgrpc

import (
	"context"
	"errors"
	"testing"
	"time"

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

func TestRetryDelay(t *testing.T) {
	c := newConfig([]Option{WithBackoff(10*time.Millisecond, 80*time.Millisecond)})
	unavailable := status.Error(codes.Unavailable, "down")
	for attempt, ceiling := range []time.Duration{10, 20, 40, 80, 80, 80} {
		ceiling *= time.Millisecond
		for range 50 {
			d, ok := c.retryDelay(unavailable, attempt)
			require.True(t, ok)
			assert.GreaterOrEqual(t, d, ceiling/2)
			assert.LessOrEqual(t, d, ceiling)
		}
	}
	d, ok := c.retryDelay(unavailable, 1000)
	require.True(t, ok, "no overflow on long runs")
	assert.LessOrEqual(t, d, 80*time.Millisecond)

	aborted := withRetryInfo(codes.Aborted, "busy", 50*time.Millisecond)
	for range 50 {
		d, ok := c.retryDelay(aborted, 0)
		require.True(t, ok)
		assert.GreaterOrEqual(t, d, 50*time.Millisecond, "the server's delay is honoured")
		assert.LessOrEqual(t, d, 60*time.Millisecond)
	}
	_, ok = c.retryDelay(status.Error(codes.Aborted, "no hint"), 0)
	assert.False(t, ok)
	_, ok = c.retryDelay(errors.New("plain"), 0)
	assert.False(t, ok)
}

func TestOptionValidation(t *testing.T) {
	for name, o := range map[string]Option{
		"nil principal":   WithPrincipal(nil),
		"empty key name":  WithMetadataKey(""),
		"binary key name": WithMetadataKey("key-bin"),
		"reserved name":   WithMetadataKey("grpc-key"),
		"bad char":        WithMetadataKey("key name"),
		"nil resolver":    WithTypeResolver(nil),
		"negative":        WithRetries(-1),
		"zero backoff":    WithBackoff(0, time.Second),
		"max below base":  WithBackoff(time.Second, time.Millisecond),
	} {
		assert.Error(t, newConfig([]Option{o}).err, name)
	}
	c := newConfig([]Option{WithMethods("/s.S/M"), WithMetadataKey("X-Idem.Key_1")})
	require.NoError(t, c.err)
	assert.Equal(t, "x-idem.key_1", c.mdKey)
	none := newConfig(nil)
	require.ErrorContains(t, none.err, "no method selected", "an interceptor that protects nothing is a misconfiguration")
	assert.True(t, none.selected(context.Background(), "/any.Service/Call"), "and fails closed")
}
