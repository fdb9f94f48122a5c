// Package txcrash holds a test, and nothing else: it SIGKILLs a process
// placing an order at each point of the work and counts what a retry does,
// with the idempotency record in PostgreSQL (completed inside the order's
// transaction) and in Redis (completed after it).
package txcrash
