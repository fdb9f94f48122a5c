package idemgrpc

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CallOption changes what the Client's interceptor does for one call. Pass
// it to the call like any grpc.CallOption; the interceptor takes it out
// before the call goes on, and without the interceptor it has no effect.
type CallOption struct {
	grpc.EmptyCallOption // the hooks grpc.CallOption requires, doing nothing

	key  string
	skip bool
}

// WithCallKey sends key as the idempotency key of this call, instead of a
// fresh one, and protects the call (key and retries) even when its method
// is not selected. Reuse the key when resending a call the program made
// before, for example after a restart. The call fails with
// codes.InvalidArgument, without being sent, when key is empty, longer than
// MaxKeyLen bytes or not printable ASCII, or when the outgoing metadata
// already holds a key.
func WithCallKey(key string) CallOption {
	return CallOption{key: key}
}

// WithoutIdempotency sends this call as it is, without a key and without
// the interceptor's retries, even when its method is selected.
func WithoutIdempotency() CallOption {
	return CallOption{skip: true}
}

// callOptions takes the CallOptions out of opts and merges them.
func callOptions(opts []grpc.CallOption) (CallOption, []grpc.CallOption, error) {
	var merged CallOption
	var rest []grpc.CallOption
	for i, o := range opts {
		co, ok := o.(CallOption)
		if !ok {
			if rest != nil {
				rest = append(rest, o)
			}
			continue
		}
		if rest == nil {
			rest = append(make([]grpc.CallOption, 0, len(opts)-1), opts[:i]...)
		}
		if co.skip {
			merged.skip = true
			continue
		}
		if err := checkKey(co.key); err != nil {
			return merged, nil, status.Errorf(codes.InvalidArgument, "idemgrpc: WithCallKey: %v", err)
		}
		if merged.key != "" && merged.key != co.key {
			return merged, nil, status.Error(codes.InvalidArgument, "idemgrpc: two different WithCallKey options")
		}
		merged.key = co.key
	}
	if merged.skip && merged.key != "" {
		return merged, nil, status.Error(codes.InvalidArgument, "idemgrpc: WithCallKey and WithoutIdempotency on one call")
	}
	if rest == nil {
		return merged, opts, nil
	}
	return merged, rest, nil
}
