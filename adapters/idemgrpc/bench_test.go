package idemgrpc_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/testkit"
)

// BenchmarkUnary compares, over a loopback TCP connection, a call through
// a server without the interceptor (bare), the first call of a key through
// it (first: claim, run, record), and a repeat (replay).
func BenchmarkUnary(b *testing.B) {
	in := mustStruct(b, map[string]any{"item": "book", "qty": 2, "note": "gift wrap"})
	md := metadata.Pairs(userHeader, "alice")

	// bare and first send the same metadata, a new key each call.
	freshKey := func(i int) context.Context {
		return metadata.NewOutgoingContext(context.Background(), metadata.Join(md, metadata.Pairs("idempotency-key", "k-"+strconv.Itoa(i))))
	}
	b.Run("bare", func(b *testing.B) {
		benchCalls(b, serve(b, &orders{}, nil), in, freshKey)
	})
	b.Run("first", func(b *testing.B) {
		benchCalls(b, serve(b, &orders{}, idemServerOpts(b)), in, freshKey)
	})
	b.Run("replay", func(b *testing.B) {
		conn := serve(b, &orders{}, idemServerOpts(b))
		ctx := metadata.NewOutgoingContext(context.Background(), metadata.Join(md, metadata.Pairs("idempotency-key", "k")))
		require.NoError(b, conn.Invoke(ctx, methodCreate, in, new(structpb.Struct)))
		benchCalls(b, conn, in, func(int) context.Context { return ctx })
	})
}

func idemServerOpts(b *testing.B) []grpc.ServerOption {
	return unaryOnly(newServer(b, testkit.NewEngine(b), idemgrpc.WithMethods(methodCreate), idemgrpc.WithPrincipal(userPrincipal)))
}

func benchCalls(b *testing.B, conn *grpc.ClientConn, in *structpb.Struct, ctxFor func(i int) context.Context) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := conn.Invoke(ctxFor(i), methodCreate, in, new(structpb.Struct)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkInterceptor measures the unary interceptor alone, called
// directly with no network, over memstore: the added cost without the
// transport's noise. (Outside a real stream the replay header is not set.)
func BenchmarkInterceptor(b *testing.B) {
	in := mustStruct(b, map[string]any{"item": "book", "qty": 2, "note": "gift wrap"})
	out := mustStruct(b, map[string]any{"id": "o-1", "item": "book", "qty": 2})
	intercept := newServer(b, testkit.NewEngine(b), idemgrpc.WithMethods(methodCreate),
		idemgrpc.WithPrincipal(func(context.Context) (string, error) { return "alice", nil })).UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: methodCreate}
	handler := func(context.Context, any) (any, error) { return out, nil }
	keyed := func(k string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs("idempotency-key", k))
	}
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := intercept(keyed("k-"+strconv.Itoa(i)), in, info, handler); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("replay", func(b *testing.B) {
		ctx := keyed("k")
		_, err := intercept(ctx, in, info, handler)
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := intercept(ctx, in, info, handler); err != nil {
				b.Fatal(err)
			}
		}
	})
}
