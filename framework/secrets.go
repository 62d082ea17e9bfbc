package framework

import (
	"maps"
	"slices"
	"strings"
)

// Masked is what jfast prints instead of a secret.
const Masked = "***"

// SecretKeyer is a plugin whose table holds secrets: keys whose whole value
// must never be printed, such as a password, a signing key, or every value of a
// table of credential headers. Keys are relative to the plugin's table and a
// "*" segment matches any one name, so "upstreams.*.headers.*" covers every
// header of every upstream whatever the header is called: declaring the table,
// not a list of header names, is what keeps an X-Partner-Auth header as secret
// as an Authorization one.
//
// The config command prints their values as "***", and boot errors never quote
// them. URLs need no declaration: the password in any URL is masked wherever
// jfast prints it (see [MaskSecrets]).
type SecretKeyer interface {
	Plugin
	SecretKeys() []string
}

// IsSecret reports whether key, a full key such as "plugin.auth.secret", holds
// a secret: a plugin declared it ([SecretKeyer]), or its name says so
// ([IsSecretKey]).
func (a *App) IsSecret(key string) bool {
	return IsSecretKey(key) || a.declares(key, secretKeyPatterns, matchKey)
}

// quiet reports whether a key's value may not be quoted in an error: a deploy
// key (addresses, DSNs and credentials depend on where the service runs, and
// often carry secrets), a secret, or a table holding one ("headers" given a
// string instead of the table of "headers.*").
func (a *App) quiet(key string) bool {
	return a.isDeploy(key) || a.holdsSecret(key) || a.declares(key, deployKeys, matchKeyPrefix)
}

// holdsSecret reports whether key is a secret or a table holding one: what
// a TOML syntax error's line never shows (the file did not parse, so the
// value is shown as written, and a mistyped secret is still a secret).
func (a *App) holdsSecret(key string) bool {
	return a.IsSecret(key) || a.declares(key, secretKeyPatterns, matchKeyPrefix)
}

// declares reports whether one of the key patterns a compiled plugin lists
// (relative to its table) matches key, a full key, by match: [matchKey] for
// the key itself, [matchKeyPrefix] for a table above it.
func (a *App) declares(key string, patterns func(Plugin) []string, match func(pattern, key string) bool) bool {
	for name, p := range a.compiled {
		for _, pattern := range patterns(p) {
			if match("plugin."+name+"."+pattern, key) {
				return true
			}
		}
	}
	return false
}

// deployKeys are the deploy keys p declares ([DeployKeyer]), if any.
func deployKeys(p Plugin) []string {
	if dk, ok := p.(DeployKeyer); ok {
		return dk.DeployKeys()
	}
	return nil
}

// secretKeyPatterns are the secret keys p declares ([SecretKeyer]), if any.
func secretKeyPatterns(p Plugin) []string {
	if sk, ok := p.(SecretKeyer); ok {
		return sk.SecretKeys()
	}
	return nil
}

// matchKeyPrefix reports whether key names a table above pattern: its
// segments match pattern's first ones, and pattern has more.
func matchKeyPrefix(pattern, key string) bool {
	ps, ks := strings.Split(pattern, "."), strings.Split(key, ".")
	if len(ks) >= len(ps) {
		return false
	}
	for i := range ks {
		if ps[i] != "*" && ps[i] != ks[i] {
			return false
		}
	}
	return true
}

// secretKeys are the last key segments whose values are secrets.
var secretKeys = map[string]bool{
	"password": true, "passwd": true, "pass": true, "pwd": true, "secret": true, "secrets": true,
	"secret_key": true, "signing_key": true, "private_key": true, "token": true,
	"api_key": true, "apikey": true, "client_secret": true, "secret_access_key": true,
	"access_token": true, "refresh_token": true, "passphrase": true, "credentials": true,
	"hmac_secret": true, "session_token": true, "auth_token": true, "sslpassword": true,
	// HTTP header names: the ones that carry credentials, wherever a plugin
	// keeps headers without declaring the table secret.
	"authorization": true, "proxy_authorization": true, "cookie": true,
}

// IsSecretKey reports whether a configuration key holds a secret by its name
// alone: its last segment, compared case-insensitively with "-" read as "_", is
// password, secret, secret_key, signing_key, private_key, token, api_key, a
// credential-carrying HTTP header (Authorization, Proxy-Authorization, Cookie,
// X-Api-Key), or ends in _password, _secret, _token, _api_key, _private_key,
// _signing_key or _secret_key. It is the net under [SecretKeyer], which plugins
// use to declare their secrets by position.
func IsSecretKey(key string) bool {
	if !endsInSecretWord(key) {
		return false // most keys: the logger asks about every attribute's
	}
	last := key[strings.LastIndexByte(key, '.')+1:]
	last = strings.ReplaceAll(strings.ToLower(last), "-", "_")
	if secretKeys[last] {
		return true
	}
	for _, suffix := range secretSuffixes {
		if strings.HasSuffix(last, suffix) {
			return true
		}
	}
	return false
}

// secretSuffixes end the names of keys that hold secrets beyond secretKeys.
var secretSuffixes = []string{"_password", "_secret", "_secrets", "_token", "_api_key", "_private_key", "_signing_key", "_secret_key"}

// secretWords are the last words (after the last "_") of secretKeys and
// secretSuffixes: every key IsSecretKey holds secret ends in one.
var secretWords = func() []string {
	var words []string
	for _, name := range append(slices.Collect(maps.Keys(secretKeys)), secretSuffixes...) {
		if w := name[strings.LastIndexByte(name, '_')+1:]; !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	return words
}()

// endsInSecretWord reports whether key's last word (after its last ".", "_"
// or "-"), in any case, is one of secretWords: a test that allocates
// nothing, ahead of IsSecretKey's rule.
func endsInSecretWord(key string) bool {
	i := len(key)
	for i > 0 && key[i-1] != '.' && key[i-1] != '_' && key[i-1] != '-' {
		i--
	}
	word := key[i:]
	for _, w := range secretWords {
		// Lengths, then last letters (all of secretWords are lower case):
		// most words end there, before EqualFold's slower loop.
		if len(w) == len(word) && w[len(w)-1] == word[len(word)-1]|0x20 && strings.EqualFold(w, word) {
			return true
		}
	}
	return false
}

// MaskSecrets returns s with the secrets it can find replaced by "***", and
// everything else exactly as written:
//
//   - the password of every URL's userinfo, scheme://user:PASSWORD@host. The
//     URL is parsed the way net/url parses an authority (it ends at the first
//     "/", "?" or "#"; the userinfo ends at its last "@"; the password starts
//     after the first ":"), so a password holding "@", ":" or percent-escapes
//     is masked whole. A URL quoted in the text (as Go's errors quote one)
//     ends at the closing quote, so a password with a space is masked too;
//   - the value of a query parameter of such a URL whose name is a secret's
//     (password, token, api_key: see [IsSecretKey]);
//   - outside URLs, the value of a name=value pair whose name is a secret's,
//     as in a key=value connection string ("host=db password=*** dbname=app").
//
// Values are masked where they stand, never searched for elsewhere in the
// text: a password "app" does not turn "database=app" into "database=***".
func MaskSecrets(s string) string {
	if !strings.Contains(s, "://") && strings.IndexByte(s, '=') < 0 {
		return s // nothing to look at: the common case costs two scans
	}
	var b strings.Builder
	changed := false
	rest := s
	for rest != "" {
		start, end := nextURL(rest)
		if start < 0 {
			start, end = len(rest), len(rest)
		}
		if m, ok := maskPairs(rest[:start]); ok {
			b.WriteString(m)
			changed = true
		} else {
			b.WriteString(rest[:start])
		}
		if start < end {
			if m, ok := maskURL(rest[start:end]); ok {
				b.WriteString(m)
				changed = true
			} else {
				b.WriteString(rest[start:end])
			}
		}
		rest = rest[end:]
	}
	if !changed {
		return s
	}
	return b.String()
}

// nextURL finds the next URL in s, from its scheme to its end, or -1.
func nextURL(s string) (start, end int) {
	from := 0
	for {
		i := strings.Index(s[from:], "://")
		if i < 0 {
			return -1, -1
		}
		i += from
		// The scheme: a letter, then letters, digits, "+", "-" and ".".
		start = i
		for start > 0 && schemeByte(s[start-1]) {
			start--
		}
		for start < i && !isLetter(s[start]) {
			start++
		}
		if start == i {
			from = i + 3
			continue
		}
		end = len(s)
		if start > 0 && isQuote(s[start-1]) {
			// Quoted: the URL ends at the closing quote, whatever it holds.
			if j := strings.IndexByte(s[i+3:], s[start-1]); j >= 0 {
				end = i + 3 + j
			}
		} else if j := strings.IndexFunc(s[i+3:], endsURL); j >= 0 {
			end = i + 3 + j
		}
		if nl := strings.IndexByte(s[i+3:end], '\n'); nl >= 0 {
			end = i + 3 + nl
		}
		return start, end
	}
}

func schemeByte(c byte) bool {
	return isLetter(c) || ('0' <= c && c <= '9') || c == '+' || c == '-' || c == '.'
}

func isLetter(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }

func isQuote(c byte) bool { return c == '"' || c == '\'' || c == '`' }

// endsURL reports whether r ends an unquoted URL in running text.
func endsURL(r rune) bool {
	switch r {
	case ' ', '\t', '\r', '\n', '"', '\'', '`', '<', '>':
		return true
	}
	return false
}

// maskURL masks the userinfo password and the secret query values of u, and
// reports whether it changed anything.
func maskURL(u string) (string, bool) {
	sep := strings.Index(u, "://") + 3
	authEnd := len(u)
	if i := strings.IndexAny(u[sep:], "/?#"); i >= 0 {
		authEnd = sep + i
	}
	changed := false
	auth := u[sep:authEnd]
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		if colon := strings.IndexByte(auth[:at], ':'); colon >= 0 && colon+1 < at {
			auth = auth[:colon+1] + Masked + auth[at:]
			changed = true
		}
	}
	tail := u[authEnd:]
	if q := strings.IndexByte(tail, '?'); q >= 0 {
		query, frag := tail[q+1:], ""
		if h := strings.IndexByte(query, '#'); h >= 0 {
			query, frag = query[:h], query[h:]
		}
		parts := strings.Split(query, "&")
		for i, part := range parts {
			if name, value, ok := strings.Cut(part, "="); ok && value != "" && IsSecretKey(name) {
				parts[i] = name + "=" + Masked
				changed = true
			}
		}
		tail = tail[:q+1] + strings.Join(parts, "&") + frag
	}
	if !changed {
		return u, false
	}
	return u[:sep] + auth + tail, true
}

// maskPairs masks the values of the secret name=value pairs of text (no URL in
// it), and reports whether it changed anything. A value is quoted ('...' or
// "...") or runs to the next space or quote: a password may hold any other
// character, so masking a "," or ")" after it too is better than printing
// what follows one.
func maskPairs(text string) (string, bool) {
	if strings.IndexByte(text, '=') < 0 {
		return text, false
	}
	var b strings.Builder
	changed := false
	last := 0
	for i := 0; i < len(text); i++ {
		if text[i] != '=' {
			continue
		}
		// The name: the word before "=", spaces allowed around the sign.
		ne := i
		for ne > 0 && text[ne-1] == ' ' {
			ne--
		}
		ns := ne
		for ns > 0 && nameByte(text[ns-1]) {
			ns--
		}
		if ns == ne || ns < last || !IsSecretKey(text[ns:ne]) {
			continue
		}
		vs := i + 1
		for vs < len(text) && text[vs] == ' ' {
			vs++
		}
		ve := valueEnd(text, vs)
		if ve == vs {
			continue
		}
		b.WriteString(text[last:vs])
		b.WriteString(Masked)
		last, i, changed = ve, ve-1, true
	}
	if !changed {
		return text, false
	}
	b.WriteString(text[last:])
	return b.String(), true
}

// valueEnd returns where the value that starts at vs in text ends. A
// quoted value ('...' or "...") ends at its closing quote; an unquoted one
// at the next space or quote (see [endsValue]). In both a backslash escapes
// the byte after it, as libpq reads a key=value connection string
// (password='it\'s', password=a\ b): the value goes on past an escaped
// quote or space, so no part of it is printed.
func valueEnd(text string, vs int) int {
	quote := byte(0)
	ve := vs
	if ve < len(text) && (text[ve] == '\'' || text[ve] == '"') {
		quote = text[ve]
		ve++
	}
	for ; ve < len(text); ve++ {
		switch c := text[ve]; {
		case c == '\\':
			ve++ // the escaped byte is the value's
		case quote != 0 && c == quote:
			return ve + 1
		case quote == 0 && endsValue(c):
			return ve
		}
	}
	return len(text)
}

func nameByte(c byte) bool {
	return isLetter(c) || ('0' <= c && c <= '9') || c == '_' || c == '-'
}

func endsValue(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '"', '\'', '`':
		return true
	}
	return false
}
