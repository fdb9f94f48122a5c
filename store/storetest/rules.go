package storetest

// The rules a case cites when it finds one broken, quoted from the
// documentation of package store.
const (
	ruleScan = "Scan calls fn with each live key that starts with prefix and its entry, " +
		"in no particular order, until fn returns false or every key was seen."
	ruleAtomic = "each implementation MUST perform each operation atomically: " +
		"a GET-then-SET implementation is not a valid Store"
	ruleConcurrent = "All methods are safe for concurrent use."
	ruleSetNX      = "SetNX stores value under key with the given TTL only if key is absent, " +
		"and reports whether it did. When key is present it returns false together with " +
		"the existing value and its remaining TTL, read in the same atomic step"
	ruleSetNXValue = "SetNXValue is SetNX without the existing entry's TTL. It stores value under key " +
		"with the given TTL only if key is absent, and reports whether it did. When key is present " +
		"it returns false together with the existing value (non-nil; the caller owns it), read in the " +
		"same atomic step as the write that did not happen; when it stored, existing is nil."
	ruleGet = "Get returns the value under key and its remaining TTL, " +
		"or an error wrapping ErrNotFound."
	ruleCAS = "CompareAndSwap replaces the value under key with new, and its TTL with ttl, " +
		"only if the current value equals old byte for byte. " +
		"It reports whether it did; an absent key reports false and no error."
	ruleCAD = "CompareAndDelete deletes key only if its current value equals old byte for byte, " +
		"and reports whether it did; an absent key reports false and no error."
	ruleConsume = "Consume deletes key and returns the value it held, in one atomic step, " +
		"or an error wrapping ErrNotFound. Of many concurrent callers at most one receives the value."
	ruleKeys   = "Keys are non-empty strings of at most MaxKeyLen bytes."
	ruleValues = "Values are non-nil byte slices (an empty, non-nil slice is a valid value) " +
		"of at most MaxValueLen bytes."
	ruleInvalid  = "Violations return an error wrapping ErrInvalid and change nothing."
	ruleTTLRound = "TTLs are positive; they are kept by the backend, not by the caller's clock, " +
		"with millisecond resolution: a TTL that is not a whole number of milliseconds is rounded up."
	ruleEntryTTL = "TTL is the time the entry has left, at millisecond resolution. " +
		"It is always positive for an entry that was returned."
	ruleExpired = "An expired entry is absent for every operation, " +
		"whether or not the backend has reclaimed its space yet."
	ruleCopy = "Values are copied on the way in and on the way out: " +
		"a caller that mutates a slice it passed or received changes nothing stored."
	ruleCtx = "When ctx is cancelled or its deadline passes before the operation is known " +
		"to have happened, the error wraps ctx.Err() and, for a deadline, ErrUnavailable too."

	ruleBatch = "SetNXBatch applies SetNX to every item atomically per key " +
		"and returns the results in input order."
	ruleBatchDup = "A key that appears more than once is claimed by its first occurrence; " +
		"later occurrences report it as existing."
	ruleBatchInvalid = "one invalid item fails the whole batch with ErrInvalid and nothing is written."
)
