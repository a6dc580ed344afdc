package config

import (
	"net/url"
	"regexp"
	"strings"
)

// HiddenContent replaces a secret wherever gflink prints or serves
// configuration or job arguments (Flink's GlobalConfiguration.HIDDEN_CONTENT).
const HiddenContent = "******"

// sensitiveParts are what make a key's value a secret: Flink's list
// (GlobalConfiguration.isSensitive), matched case-insensitively anywhere in
// the key, plus "credentials" for gflink's own
// high-availability.zookeeper.client.digest-credentials.
var sensitiveParts = []string{
	"password", "secret", "fs.azure.account.key", "apikey", "api-key", "auth-params",
	"service-key", "token", "basic-auth", "jaas.config", "http-headers", "credentials",
}

// IsSensitive reports whether the value of key is a secret to be masked.
func IsSensitive(key string) bool {
	k := strings.ToLower(key)
	for _, p := range sensitiveParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// Masked is value as it may be shown for key: HiddenContent for a secret.
func Masked(key, value string) string {
	if IsSensitive(key) {
		return HiddenContent
	}
	return value
}

// uriQuery finds the query of a URI given as an argument
// (kafka://broker/topic?sasl.password=…).
var uriQuery = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*://[^?#]*\?`)

// MaskArgs returns a job's or a command's arguments as they may be logged,
// stored where others can read them, or served: the values of sensitive
// options masked, whether given as "--key value", "--key=value",
// "-Dkey=value", "-D key=value", or as parameters in a URI's query.
func MaskArgs(args []string) []string {
	out := make([]string, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		out[i] = maskURI(a)
		key, value, hasValue := option(a)
		switch {
		case a == "-D" && i+1 < len(args):
			i++
			out[i] = maskURI(args[i])
			if k, v, ok := strings.Cut(args[i], "="); ok && IsSensitive(k) {
				out[i] = args[i][:len(args[i])-len(v)] + HiddenContent
			}
		case hasValue && IsSensitive(key):
			out[i] = a[:len(a)-len(value)] + HiddenContent
		case !hasValue && key != "" && IsSensitive(key) && i+1 < len(args):
			i++
			out[i] = HiddenContent
		}
	}
	return out
}

// option splits "--key=value", "-key=value" and "-Dkey=value" into key and
// value; "--key" has no value. A word that is no option has no key.
func option(a string) (key, value string, hasValue bool) {
	if !strings.HasPrefix(a, "-") || a == "-D" {
		return "", "", false
	}
	name := strings.TrimLeft(a, "-")
	if !strings.HasPrefix(a, "--") {
		name = strings.TrimPrefix(name, "D")
	}
	return strings.Cut(name, "=")
}

// uriPassword finds the password of a URI's userinfo (kafka://u:pw@host).
var uriPassword = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*://[^/?#:@]*:)[^/?#@]*@`)

// maskURI masks a URI's password and the sensitive parameters of its
// query.
func maskURI(a string) string {
	a = uriPassword.ReplaceAllString(a, "${1}"+HiddenContent+"@")
	loc := uriQuery.FindStringIndex(a)
	if loc == nil {
		return a
	}
	query, frag, _ := strings.Cut(a[loc[1]:], "#")
	parts := strings.Split(query, "&")
	changed := false
	for i, p := range parts {
		k, _, ok := strings.Cut(p, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if ok && IsSensitive(k) {
			parts[i] = p[:strings.Index(p, "=")+1] + HiddenContent
			changed = true
		}
	}
	if !changed {
		return a
	}
	s := a[:loc[1]] + strings.Join(parts, "&")
	if frag != "" {
		s += "#" + frag
	}
	return s
}

// MaskedEntries is the configuration as key/value pairs, sorted by key,
// with secrets masked: what the REST API serves and logs print.
func (c *Configuration) MaskedEntries() [][2]string {
	var out [][2]string
	for _, k := range c.Keys() {
		v, _ := c.Get(k)
		out = append(out, [2]string{k, Masked(k, v.Raw)})
	}
	return out
}
