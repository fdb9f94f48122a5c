// Package idemgrpc puts an idemkit Engine in front of gRPC services, as
// interceptors named after those of go-grpc-middleware v2.
//
// On the server, UnaryServerInterceptor runs each selected unary call once
// per (principal, method, idempotency key): the key comes from the
// "idempotency-key" request metadata, the principal from the function given
// with WithPrincipal (required), and a repeat gets the first response back,
// rebuilt through the protobuf registry, with the "idempotent-replayed:
// true" response header. Final error statuses are replayed too; transient
// ones release the key. StreamServerInterceptor offers claim-once for
// streaming methods, without replay.
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(idemgrpc.UnaryServerInterceptor(engine,
//			idemgrpc.WithMethods("/shop.Orders/Create"),
//			idemgrpc.WithPrincipal(userFromContext))),
//	)
//
// Methods are selected explicitly (WithMethods, WithSelector) because only
// the service author knows which methods are not idempotent; the others
// pass through untouched.
//
// On the client, UnaryClientInterceptor adds a fresh key to selected calls
// that lack one, and the key stays the same when grpc-go's retry policy or
// the interceptor's own bounded retries (WithRetries) resend the call, so
// the server replays instead of running the handler again.
//
// # Status codes
//
// A missing or malformed key fails with InvalidArgument, a repeat while the
// first call runs with Aborted and an errdetails.RetryInfo, a reused key
// with a different request with FailedPrecondition, a failing store under
// the fail-closed policy with Unavailable, and a failing principal function
// with Unauthenticated.
package idemgrpc
