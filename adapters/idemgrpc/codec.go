package idemgrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Stored forms start with a format byte, so the layout can evolve.
const (
	formatResponse byte = 1 // uvarint name length, full type name, message bytes
	formatStatus   byte = 1 // google.rpc.Status bytes
)

var errCorrupt = errors.New("idemgrpc: corrupt stored response")

// errCorruptStatus is what DecodeError returns for a stored status it
// cannot decode; the unary interceptor does not mark it replayed.
var errCorruptStatus = status.Error(codes.Internal, "idemgrpc: corrupt stored status")

// encodeResponse stores a response message as its full type name and its
// wire bytes.
func encodeResponse(m proto.Message) ([]byte, error) {
	name := m.ProtoReflect().Descriptor().FullName()
	size := proto.Size(m)
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(name)+size)
	b = append(b, formatResponse)
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, m)
	if err != nil {
		return nil, fmt.Errorf("idemgrpc: marshal response %s: %w", name, err)
	}
	return b, nil
}

// decodeResponse rebuilds a stored response through the type resolver.
func decodeResponse(data []byte, types protoregistry.MessageTypeResolver) (proto.Message, error) {
	if len(data) == 0 || data[0] != formatResponse {
		return nil, errCorrupt
	}
	n, w := binary.Uvarint(data[1:])
	if w <= 0 || n > uint64(len(data)-1-w) {
		return nil, errCorrupt
	}
	name := protoreflect.FullName(data[1+w : 1+w+int(n)])
	mt, err := types.FindMessageByName(name)
	if err != nil {
		return nil, fmt.Errorf("idemgrpc: stored response type %s: %w", name, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(data[1+w+int(n):], m); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errCorrupt, name, err)
	}
	return m, nil
}

// statusCodec is the engine ErrorCodec of the unary interceptor: errors
// whose status code is final are stored as google.rpc.Status bytes and
// replayed as the same status.
type statusCodec map[codes.Code]bool

// EncodeError implements idemkit.ErrorCodec.
func (sc statusCodec) EncodeError(err error) ([]byte, bool) {
	st, ok := status.FromError(err)
	if !ok || !sc[st.Code()] {
		return nil, false
	}
	p := st.Proto()
	// A proto3 string must be UTF-8, or the status cannot be marshalled
	// and the final error would be released instead of stored. gRPC sends
	// each invalid byte of a message as U+FFFD, so store what it sent.
	p.Message = wireMessage(p.Message)
	b, merr := proto.MarshalOptions{}.MarshalAppend([]byte{formatStatus}, p)
	if merr != nil {
		return nil, false
	}
	return b, true
}

// wireMessage returns msg as a gRPC client receives it: each byte that is
// not part of valid UTF-8 replaced by U+FFFD.
func wireMessage(msg string) string {
	if utf8.ValidString(msg) {
		return msg
	}
	var b strings.Builder
	for _, r := range msg { // an invalid byte ranges as one utf8.RuneError
		b.WriteRune(r)
	}
	return b.String()
}

// DecodeError implements idemkit.ErrorCodec.
func (sc statusCodec) DecodeError(data []byte) error {
	p := &spb.Status{}
	if len(data) == 0 || data[0] != formatStatus || proto.Unmarshal(data[1:], p) != nil || p.GetCode() == int32(codes.OK) {
		// Final statuses are never OK: one that decodes so is corrupt,
		// and must not replay as a success without a response.
		return errCorruptStatus
	}
	return status.FromProto(p).Err()
}
