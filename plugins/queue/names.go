package queue

import "fmt"

// KindRule is the rule every job kind follows, on every backend: River
// (postgres) refuses to start workers for a kind that is not a word
// character followed by at least one more character of its own set (its
// UserSpecifiedIDOrKindRE), so a kind of one character, which the other
// backends would run, is refused by Handle, Enqueue and the kinds key alike,
// and a service can change backend without renaming a job.
const KindRule = "2 to 100 letters, digits, _ . : and -, starting with a letter or digit"

// kindError is the refusal of a kind that breaks KindRule.
func kindError(kind string) error {
	return fmt.Errorf("queue: job kind %q must be %s", kind, KindRule)
}

// validKind reports whether kind follows KindRule: what kindRe matches,
// checked byte by byte because Enqueue checks it on every call and the regexp
// costs about as much as the rest of the envelope.
func validKind(kind string) bool {
	if len(kind) < 2 || len(kind) > 100 || !alnum(kind[0]) {
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

// RiverQueueRule is what the postgres backend (River) asks of a queue name
// beyond the name rule every queue follows (framework.NameRule): River
// refuses any other when its workers start, or the insert of a job.
const RiverQueueRule = "at most 64 characters, and no two of - and _ in a row nor one at the end"

// riverQueueName reports whether name, which follows framework.NameRule,
// follows RiverQueueRule too.
func riverQueueName(name string) bool {
	if len(name) > 64 || !lowerOrDigit(name[len(name)-1]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if !lowerOrDigit(name[i]) && !lowerOrDigit(name[i-1]) {
			return false
		}
	}
	return true
}
