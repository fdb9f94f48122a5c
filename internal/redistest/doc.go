// Package redistest starts throwaway redis-server processes for tests:
// a standalone server, a primary with one replica, or a Redis Cluster.
//
// Every server listens on a free loopback port, keeps no data on disk
// (--save "" --appendonly no) and writes its log into a directory from
// t.TempDir(). Each is killed, and waited for, when the test that started
// it ends; on Linux the kernel also kills it when the test process dies
// without running its cleanups (a -timeout panic, os.Exit, SIGKILL).
// Servers never touch a Redis the machine may already run; a port taken
// by another process between the free-port probe and the server's bind
// makes Start try another port (Restart keeps its port and fails).
//
// The redis-server and redis-cli binaries must be in PATH. When they are
// not, the test fails (it does not skip) with a message naming the package
// to install: apt-get install -y redis-server.
//
// The functions take a testing.TB and call its Fatal methods, so they must
// be called from the goroutine running the test. The returned values are
// safe for concurrent use.
package redistest
