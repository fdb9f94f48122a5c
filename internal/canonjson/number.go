package canonjson

import (
	"math/big"
	"strconv"
)

// Layout limits of canonical numbers; see the documentation of package
// keying, section "Canonical JSON".
const (
	maxPlainIntDigits = 40 // integers with more digits use exponent form
	minPlainExp       = -7 // fractions whose leading digit is further right use exponent form
	maxSmallExpDigits = 15 // longer exponents are handled with math/big
)

// number parses a JSON number at the current offset and appends its
// canonical form to out. An integer already in canonical form is copied
// as is; any other number goes through decimal.
func (p *Parser) number(out []byte) ([]byte, error) {
	if end := plainInteger(p.in, p.pos); end >= 0 {
		out = append(out, p.in[p.pos:end]...)
		p.pos = end
		return out, nil
	}
	return p.decimal(out)
}

// decimal parses any JSON number at the current offset and appends its
// canonical form to out.
func (p *Parser) decimal(out []byte) ([]byte, error) {
	neg := p.next('-')
	if neg {
		p.pos++
	}
	intPart, ok := p.digitRun()
	if !ok || (len(intPart) > 1 && intPart[0] == '0') {
		return nil, p.fail("invalid number")
	}
	var frac, exp []byte
	if p.next('.') {
		p.pos++
		if frac, ok = p.digitRun(); !ok {
			return nil, p.fail("invalid number fraction")
		}
	}
	expNeg := false
	if p.next('e') || p.next('E') {
		p.pos++
		if p.next('+') || p.next('-') {
			expNeg = p.in[p.pos] == '-'
			p.pos++
		}
		if exp, ok = p.digitRun(); !ok {
			return nil, p.fail("invalid number exponent")
		}
	}
	p.digits = append(append(p.digits[:0], intPart...), frac...)
	return appendDecimal(out, neg, p.digits, len(frac), expNeg, exp), nil
}

// digitRun consumes one or more ASCII digits and returns them.
func (p *Parser) digitRun() ([]byte, bool) {
	start := p.pos
	for p.pos < len(p.in) && isDigit(p.in[p.pos]) {
		p.pos++
	}
	return p.in[start:p.pos], p.pos > start
}

// appendDecimal appends the canonical form of the number whose value is
// ±digits × 10^(±exp - fracLen) to out.
func appendDecimal(out []byte, neg bool, digits []byte, fracLen int, expNeg bool, exp []byte) []byte {
	digits = trimLeft(digits, '0')
	if len(digits) == 0 {
		return append(out, '0')
	}
	sig := trimRight(digits, '0')
	shift := int64(len(digits)-len(sig)) - int64(fracLen) // add to the written exponent
	if neg {
		out = append(out, '-')
	}
	exp = trimLeft(exp, '0')
	if len(exp) > maxSmallExpDigits {
		return appendScientificBig(out, sig, expNeg, exp, shift)
	}
	e := smallInt(exp)
	if expNeg {
		e = -e
	}
	return appendSmall(out, sig, e+shift)
}

// appendSmall appends sig × 10^e, where sig has no leading or trailing
// zeros, choosing the layout that keying documents (section "Canonical
// JSON").
func appendSmall(out, sig []byte, e int64) []byte {
	n := int64(len(sig))
	lead := n - 1 + e // power of ten of the leading digit
	switch {
	case e >= 0 && n+e <= maxPlainIntDigits:
		out = append(out, sig...)
		for range e {
			out = append(out, '0')
		}
		return out
	case e < 0 && lead >= 0:
		out = append(out, sig[:lead+1]...)
		out = append(out, '.')
		return append(out, sig[lead+1:]...)
	case e < 0 && lead >= minPlainExp:
		out = append(out, '0', '.')
		for range -lead - 1 {
			out = append(out, '0')
		}
		return append(out, sig...)
	}
	out = appendMantissa(out, sig)
	return strconv.AppendInt(out, lead, 10)
}

// appendScientificBig appends sig × 10^(±exp + shift) in exponent form,
// for exponents too long for int64 arithmetic.
func appendScientificBig(out, sig []byte, expNeg bool, exp []byte, shift int64) []byte {
	lead, _ := new(big.Int).SetString(string(exp), 10) // exp is all digits
	if expNeg {
		lead.Neg(lead)
	}
	lead.Add(lead, big.NewInt(shift+int64(len(sig))-1))
	out = appendMantissa(out, sig)
	return lead.Append(out, 10)
}

// appendMantissa appends d[.ddd]e, the part of the exponent form before the
// exponent's digits.
func appendMantissa(out, sig []byte) []byte {
	out = append(out, sig[0])
	if len(sig) > 1 {
		out = append(out, '.')
		out = append(out, sig[1:]...)
	}
	return append(out, 'e')
}

// smallInt returns the value of at most maxSmallExpDigits decimal digits.
func smallInt(digits []byte) int64 {
	var v int64
	for _, c := range digits {
		v = v*10 + int64(c-'0')
	}
	return v
}

// trimLeft returns b without leading c bytes.
func trimLeft(b []byte, c byte) []byte {
	for len(b) > 0 && b[0] == c {
		b = b[1:]
	}
	return b
}

// trimRight returns b without trailing c bytes.
func trimRight(b []byte, c byte) []byte {
	for len(b) > 0 && b[len(b)-1] == c {
		b = b[:len(b)-1]
	}
	return b
}
