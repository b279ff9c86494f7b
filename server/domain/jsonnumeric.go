package domain

// PostgreSQL's numeric, which jsonb stores every JSON number as, has a range; JSON numbers have
// none. These are its limits as numeric_in applies them (numeric.c: set_var_from_str and
// make_result): an exponent beyond INT_MAX/2 either way is refused outright; the display scale
// (digits after the decimal point, trailing zeroes included, less the exponent, at least 0) must
// fit 14 bits; and the weight of the first nonzero digit, in base-10000 digits, must fit an int16
// (a zero's weight is 0; a weight below the int16's range needs a scale beyond 14 bits).
const (
	// PostgreSQL 15 also refuses an exponent of exactly INT_MAX/2, 16 takes it: this check
	// follows 16, since it must never refuse what PostgreSQL takes. Only a zero is at stake there
	// (any other number that far is out of range by its weight or scale); PostgreSQL 15 then
	// refuses it itself.
	numericMaxExponent = 1<<31/2 - 1 // INT_MAX / 2
	numericMaxScale    = 0x3FFF      // NUMERIC_DSCALE_MASK: 16383 digits after the point
	numericMaxDecimal  = 4*32768 - 1 // the first nonzero digit at most 10^131071: 131072 digits before the point
)

// NumbersFitNumeric reports whether every number in the JSON document doc is one PostgreSQL's
// numeric (and so jsonb) takes. It refuses only what PostgreSQL refuses, and a number it passes
// is taken, but for a zero at PostgreSQL 15's exponent limit (above);
// TestNumbersFitNumericAsPostgreSQL holds it to PostgreSQL on each side of each limit. doc must
// be valid JSON: it is scanned, not parsed; digits inside strings are not numbers.
func NumbersFitNumeric(doc []byte) bool {
	for i := 0; i < len(doc); {
		switch c := doc[i]; {
		case c == '"':
			i++
			for i < len(doc) && doc[i] != '"' {
				if doc[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case c == '-' || c >= '0' && c <= '9':
			n, ok := fitNumber(doc[i:])
			if !ok {
				return false
			}
			i += n
		default:
			i++
		}
	}
	return true
}

// fitNumber reads the JSON number at the start of b, reporting its length and whether numeric
// takes it.
func fitNumber(b []byte) (int, bool) {
	i := 0
	if b[i] == '-' {
		i++
	}
	// first is the number of digits before the first nonzero one (intDigits+fracDigits when the
	// number is zero).
	intDigits, fracDigits, first := 0, 0, -1
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if first < 0 && b[i] != '0' {
			first = intDigits
		}
		intDigits++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if first < 0 && b[i] != '0' {
				first = intDigits + fracDigits
			}
			fracDigits++
		}
	}
	var exp int64
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		negative := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			negative = b[i] == '-'
			i++
		}
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if exp <= numericMaxExponent { // saturates: anything past it is refused alike
				exp = exp*10 + int64(b[i]-'0')
			}
		}
		if exp > numericMaxExponent {
			return i, false
		}
		if negative {
			exp = -exp
		}
	}
	if scale := int64(fracDigits) - exp; scale > numericMaxScale {
		return i, false
	}
	// The first nonzero digit's power of ten; a zero has no weight to check.
	if first >= 0 && int64(intDigits-1-first)+exp > numericMaxDecimal {
		return i, false
	}
	return i, true
}
