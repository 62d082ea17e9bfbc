package queue

// validKind reports whether kind is a job kind: what kindRe matches (a letter
// or digit, then letters, digits, _ . : and -, at most 100 in all), checked
// byte by byte because Enqueue checks it on every call and the regexp costs
// about as much as the rest of the envelope.
func validKind(kind string) bool {
	if len(kind) == 0 || len(kind) > 100 || !alnum(kind[0]) {
		return false
	}
	for i := 1; i < len(kind); i++ {
		if c := kind[i]; !alnum(c) && c != '_' && c != '.' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

func lowerOrDigit(c byte) bool { return ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') }

func alnum(c byte) bool { return lowerOrDigit(c) || ('A' <= c && c <= 'Z') }
