// Package b64url writes 16-byte values, such as truncated digests, as
// unpadded base64url text (RFC 4648 §5) without the general encoder's
// loop: every output byte is computed by its own statement.
package b64url

// alphabet is the base64url alphabet; index i holds the digit for the
// 6-bit value i.
const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// Append16 appends the unpadded base64url text of src, 22 bytes, to dst
// and returns the extended buffer. The text is what
// base64.RawURLEncoding.AppendEncode(dst, src[:]) appends.
func Append16(dst []byte, src [16]byte) []byte {
	n := len(dst)
	if cap(dst)-n < 22 {
		dst = append(dst, make([]byte, 22)...)
	} else {
		dst = dst[:n+22]
	}
	t := (*[22]byte)(dst[n:])
	// Five groups of three bytes make four digits each; the last byte
	// makes two, its low two bits followed by four zero bits.
	v := uint(src[0])<<16 | uint(src[1])<<8 | uint(src[2])
	t[0], t[1], t[2], t[3] = alphabet[v>>18], alphabet[v>>12&63], alphabet[v>>6&63], alphabet[v&63]
	v = uint(src[3])<<16 | uint(src[4])<<8 | uint(src[5])
	t[4], t[5], t[6], t[7] = alphabet[v>>18], alphabet[v>>12&63], alphabet[v>>6&63], alphabet[v&63]
	v = uint(src[6])<<16 | uint(src[7])<<8 | uint(src[8])
	t[8], t[9], t[10], t[11] = alphabet[v>>18], alphabet[v>>12&63], alphabet[v>>6&63], alphabet[v&63]
	v = uint(src[9])<<16 | uint(src[10])<<8 | uint(src[11])
	t[12], t[13], t[14], t[15] = alphabet[v>>18], alphabet[v>>12&63], alphabet[v>>6&63], alphabet[v&63]
	v = uint(src[12])<<16 | uint(src[13])<<8 | uint(src[14])
	t[16], t[17], t[18], t[19] = alphabet[v>>18], alphabet[v>>12&63], alphabet[v>>6&63], alphabet[v&63]
	t[20], t[21] = alphabet[src[15]>>2], alphabet[src[15]&3<<4]
	return dst
}
