// Package httpcore is what every HTTP-shaped idemkit adapter shares, kept
// once: the stored-response format and its encoder and decoder, the
// terminal records that stand for a response that was not kept, the
// problem catalogue (type names, titles, statuses, descriptions and the
// optional members), the header names, the default store policy, and the
// glue that reads a key header sent once or more.
//
// idemhttp and idemfiber import it; cmd/idemproxy, outside adapters/,
// reaches it through the names idemhttp exports, which are aliases of
// these. The package writes to no response itself: each adapter writes
// through its own server's types (net/http, fasthttp) what this package
// encodes, decodes and names.
package httpcore
