// Package dynalitetest starts dynalite, a DynamoDB-compatible server
// (npm package dynalite, run by Node.js), on a free loopback port for the
// tests of the DynamoDB store and the packages built on it. It uses the
// standard library only.
//
// The server is the one scripts/test.sh installs (see
// store/dynamostore/install-dynalite.sh) and names in DYNALITE_CLI,
// the path of dynalite's cli.js. When the variable is unset the tests
// skip, saying why, except under CI=true, where Lookup reports an error
// so that a CI run never passes by skipping.
package dynalitetest
