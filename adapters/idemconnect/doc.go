// Package idemconnect puts an idemkit Engine in front of Connect services
// (connectrpc.com/connect), for the Connect, gRPC and gRPC-Web protocols
// alike. A Server and a Client are connect.Interceptors:
//
//	idem, err := idemconnect.NewServer(engine,
//		idemconnect.WithProcedure[shopv1.CreateResponse](shopv1connect.OrderServiceCreateProcedure),
//		idemconnect.WithPrincipal(userFromContext))
//	if err != nil {
//		return err
//	}
//	path, handler := shopv1connect.NewOrderServiceHandler(svc, connect.WithInterceptors(idem))
//
// It follows idemgrpc: the same codes, details, final codes, streaming
// policy and client retries, so a service moved from grpc-go to Connect
// keeps its contract. It is built on connect v1 (connectrpc.com/connect):
// an interceptor installs only on servers and clients of its own major,
// and the services and generated code that exist are v1; connect v2 is a
// new Go API over the same wire protocol.
//
// Procedures are selected explicitly, each with its response type
// (WithProcedure), because only the service author knows which are not
// idempotent, and because a replay is built as the
// *connect.Response[Res] the handler returns, which the interceptors
// around this one see; the others pass through untouched. Every
// option is checked by the constructor, which returns an error wrapping
// idemkit.ErrInvalid rather than build an interceptor that fails later.
//
// # Server
//
// The unary interceptor runs each selected call once per (principal,
// procedure, idempotency key). The key comes from the "Idempotency-Key"
// request header (WithKeyHeader), parsed as idemhttp parses it (a bare
// key or a structured-field string); the payload fingerprint is the
// deterministic protobuf encoding of the request with the procedure. The
// first call runs the handler; its response message, headers and
// trailers (those of the *connect.Response and those set through
// connect.CallInfoForHandlerContext) are stored in the shared
// stored-response format. Every repeat gets them back, with the response
// header "Idempotent-Replayed: true", over whichever protocol and codec
// it uses: the message is stored as protobuf, not as the first call's
// wire bytes. A handler error whose code is final (WithFinalCodes) is
// stored and replayed as the same code, message, details and metadata;
// any other error releases the key so a retry runs the handler again.
//
// Once the handler has run, its own outcome is returned even when it
// could not be recorded (store failure, lost lease, response over
// idemkit.WithMaxResultSize): work that was done is never hidden. A
// response over the size cap is not stored, but its key keeps a terminal
// record: every repeat fails with CodeResourceExhausted, marked with the
// ReplayedHeader, and the handler never runs twice
// (WithEngineOptions(idemkit.WithOversized(idemkit.ReleaseKey)) releases
// the key instead).
//
// # Codes
//
// As idemgrpc: a missing key (unless WithOptionalKey), or one that is
// malformed or sent twice, fails with CodeInvalidArgument. A repeat while
// the first call runs fails with CodeAborted, with an
// errdetails.RetryInfo detail (read it with RetryDelay), a Retry-After
// header in seconds and, over gRPC and gRPC-Web, the
// grpc-retry-pushback-ms trailer grpc-go's retry policy honours
// (idemkit.WithWait makes repeats wait instead). A key
// reused with a different request fails with CodeFailedPrecondition: the
// request is valid, but the key's state refuses it. A failing store fails
// with CodeUnavailable under the fail-closed policy (with idemkit.FailOpen
// the handler runs unguarded), and with CodeInternal for any other store
// error or a stored response that cannot be rebuilt. A principal function
// that fails gives its own *connect.Error when it returns one, and
// CodeUnauthenticated otherwise. No error sent to a client holds the key,
// the principal or a store error's text.
//
// # Streams
//
// The streaming interceptor admits each selected stream once per
// (principal, procedure, key) inside the engine's Guard window
// (idemkit.WithWindow in WithEngineOptions, default 5s) and refuses
// repeats with CodeAlreadyExists, carrying an errdetails.RetryInfo with
// the time left in the window. Streams get claim-once, not replay: a
// stream's responses interleave with the client's own messages, and
// replaying one would mean buffering every message of every stream.
// There is no payload fingerprint either, since the request messages
// arrive after the claim. idemkit.WithRelease says what happens to the
// claim when the handler ends (default: kept for the whole window).
//
// # Keys and principals
//
// The principal (WithPrincipal) is given to the engine as the key's
// scope: keys of different callers never meet, and the store keeps only
// digests of the principal and of the key. The key the engine sees is
// namespaced "connect" and holds the procedure, so no other adapter's
// keys, nor another procedure's, can meet a call's.
//
// # Client retries
//
// The client interceptor adds a fresh key (keying.NewToken) to each
// selected call whose request header lacks one, once, before any
// attempt, so every resend carries the same key and the server replays
// instead of running the handler again. WithRetries resends on
// CodeUnavailable after a jittered exponential backoff (WithBackoff), and
// on CodeAborted carrying a RetryInfo after the delay it gives, unless
// that delay is over the maximum backoff. A wait that cannot end before
// ctx's deadline is not started: the last error is returned. To resend a
// call made before a restart, set its key in the request header: the
// interceptor keeps a key it finds. Streams get a key, and are not
// resent.
//
// # Fencing tokens
//
// With WithFenceHeader, the client interceptor sends the fencing token of
// the idemkit claim whose work makes a call (idemkit.FenceFromContext) in
// a request header (FenceHeader is a suggested name, the same on the wire
// as idemgrpc.FenceMetadataKey). The called service reads it with
// FenceFromHeader, keeps the highest token seen per idempotency key and
// refuses a lower one: a caller whose lease ended while it was stalled
// cannot act once the caller that took the key over has been there.
//
// A Server installed on a client, or a Client on a handler, fails every
// call with CodeInternal rather than do nothing.
package idemconnect
