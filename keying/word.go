package keying

// This file holds keying's one step that reads eight bytes at a time,
// shared by Key (literalLen) and ParseKeyHeader (isBareKey); word_test.go
// compares it with a plain byte-by-byte loop at every position. The
// canonical JSON parser's eight-byte steps are in
// internal/canonjson/word.go.

// allMarked reports whether table holds 1 for every byte of v; its
// entries are 0 or 1. It looks at eight bytes a step, whose entries AND
// to 1 only when all eight are 1; the last step reads the last eight
// bytes, which may overlap the step before.
func allMarked[T string | []byte](v T, table *[256]byte) bool {
	if len(v) < 8 {
		ok := byte(1)
		for i := 0; i < len(v); i++ {
			ok &= table[v[i]]
		}
		return ok == 1
	}
	w := v
	for len(w) > 8 {
		if table[w[0]]&table[w[1]]&table[w[2]]&table[w[3]]&table[w[4]]&table[w[5]]&table[w[6]]&table[w[7]] == 0 {
			return false
		}
		w = w[8:]
	}
	w = v[len(v)-8:]
	return table[w[0]]&table[w[1]]&table[w[2]]&table[w[3]]&table[w[4]]&table[w[5]]&table[w[6]]&table[w[7]] == 1
}
