package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// security turns the connection's security settings into client options.
// They are the Kafka Java client's (security.protocol, sasl.mechanism,
// sasl.jaas.config, ssl.truststore.location, ...), so a Flink job's
// properties carry over, plus gflink's shorter tls=true and
// sasl.username / sasl.password. Where the Java client would silently
// ignore a setting (an ssl.* file over PLAINTEXT, a SASL mechanism with
// security.protocol=PLAINTEXT or SSL) it is an error here: a user who sets
// it expects it used. sasl.mechanism without security.protocol means SASL
// over the connection as it is (SASL_PLAINTEXT, or SASL_SSL with tls=true).
func (p *Params) security() ([]kgo.Opt, error) {
	proto, protoSet := p.get("security.protocol")
	proto = strings.ToUpper(proto)
	useTLS, useSASL := false, false
	switch proto {
	case "", "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return nil, p.errorf("security.protocol", "accepted: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
	}
	if _, ok := p.get("tls"); ok {
		if protoSet && p.bool("tls") != useTLS {
			return nil, fmt.Errorf("%s contradicts %s", p.where["tls"], p.where["security.protocol"])
		}
		useTLS = p.bool("tls")
	}
	mech, mechSet := p.get("sasl.mechanism")
	if mechSet {
		if protoSet && !useSASL {
			return nil, p.errorf("sasl.mechanism", "security.protocol=%s does not use SASL; set SASL_PLAINTEXT or SASL_SSL", proto)
		}
		useSASL = true
	}
	var opts []kgo.Opt
	if useTLS {
		cfg, err := p.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	} else if err := p.unused("the connection does not use TLS; set security.protocol=SSL or SASL_SSL (or tls=true)",
		"ssl.truststore.location", "ssl.keystore.location", "ssl.endpoint.identification.algorithm"); err != nil {
		return nil, err
	}
	if useSASL {
		m, err := p.sasl(mech)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	} else if err := p.unused("the connection does not use SASL; set sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
		"sasl.username", "sasl.password", "sasl.jaas.config"); err != nil {
		return nil, err
	}
	return opts, nil
}

// unused is an error naming the first of keys that is set, saying why it
// would be ignored.
func (p *Params) unused(why string, keys ...string) error {
	for _, k := range keys {
		if _, ok := p.get(k); ok {
			return p.errorf(k, "%s", why)
		}
	}
	return nil
}

// jaasCredential reads username="..." and password="..." from a JAAS
// login line, e.g. org.apache.kafka.common.security.plain.PlainLoginModule
// required username="alice" password="secret";
var jaasCredential = regexp.MustCompile(`\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"`)

func (p *Params) sasl(mech string) (sasl.Mechanism, error) {
	user, userSet := p.get("sasl.username")
	pass, _ := p.get("sasl.password")
	if jaas, ok := p.get("sasl.jaas.config"); ok {
		for _, k := range []string{"sasl.username", "sasl.password"} {
			if _, ok := p.get(k); ok {
				return nil, fmt.Errorf("%s and %s both give the credentials: use one", p.where["sasl.jaas.config"], p.where[k])
			}
		}
		module := strings.Fields(jaas)
		if len(module) == 0 {
			return nil, p.errorf("sasl.jaas.config", "empty")
		}
		switch m := strings.ToUpper(mech); {
		case strings.HasSuffix(module[0], "PlainLoginModule") && (m == "PLAIN" || m == ""):
			mech = "PLAIN"
		case strings.HasSuffix(module[0], "ScramLoginModule") && strings.HasPrefix(m, "SCRAM-"):
		case strings.HasSuffix(module[0], "ScramLoginModule") && m == "":
			return nil, p.errorf("sasl.jaas.config", "a ScramLoginModule needs sasl.mechanism=SCRAM-SHA-256 or SCRAM-SHA-512")
		default:
			return nil, p.errorf("sasl.jaas.config", "expected org.apache.kafka.common.security.plain.PlainLoginModule (sasl.mechanism=PLAIN) or org.apache.kafka.common.security.scram.ScramLoginModule (SCRAM-SHA-256, SCRAM-SHA-512) required username=\"...\" password=\"...\";")
		}
		for _, m := range jaasCredential.FindAllStringSubmatch(jaas, -1) {
			v := strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[2])
			if m[1] == "username" {
				user, userSet = v, true
			} else {
				pass = v
			}
		}
	}
	if mech == "" {
		return nil, errors.New("kafka: security.protocol uses SASL but sasl.mechanism is not set (the Java client's default, GSSAPI/Kerberos, is not supported): accepted: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
	}
	if !userSet || user == "" {
		return nil, fmt.Errorf("kafka: SASL %s needs a user: sasl.username and sasl.password, or sasl.jaas.config with username=\"...\" password=\"...\"", mech)
	}
	switch strings.ToUpper(mech) {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, p.errorf("sasl.mechanism", "accepted: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI and OAUTHBEARER are not supported)")
}

// tlsConfig is the TLS of the connection: the system's roots unless a PEM
// trust store is given, a client certificate from a PEM key store, and the
// brokers' host names checked unless ssl.endpoint.identification.algorithm
// is empty (the Java client's way to turn that check off).
func (p *Params) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if loc, ok := p.get("ssl.truststore.location"); ok {
		b, err := p.pemFile("ssl.truststore.location", "ssl.truststore.type", loc)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, p.errorf("ssl.truststore.location", "no PEM certificate in the file")
		}
	}
	if loc, ok := p.get("ssl.keystore.location"); ok {
		b, err := p.pemFile("ssl.keystore.location", "ssl.keystore.type", loc)
		if err != nil {
			return nil, err
		}
		// A PEM key store (Kafka's ssl.keystore.type=PEM) holds the
		// certificate chain and an unencrypted private key in one file.
		cert, err := tls.X509KeyPair(b, b)
		if err != nil {
			return nil, p.errorf("ssl.keystore.location", "expected a certificate chain and an unencrypted private key in PEM: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if alg, ok := p.get("ssl.endpoint.identification.algorithm"); ok {
		switch strings.ToLower(alg) {
		case "https":
		case "":
			// Verify the chain, not the name: what the Java client does
			// with the check turned off.
			roots := cfg.RootCAs
			cfg.InsecureSkipVerify = true
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("kafka: the broker sent no certificate")
				}
				inter := x509.NewCertPool()
				for _, c := range cs.PeerCertificates[1:] {
					inter.AddCert(c)
				}
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
				return err
			}
		default:
			return nil, p.errorf("ssl.endpoint.identification.algorithm", "accepted: https (check the brokers' host names, the default), or empty (do not)")
		}
	}
	return cfg, nil
}

// pemFile reads a trust or key store, which must be PEM: gflink does not
// read Java's JKS or PKCS12 stores.
func (p *Params) pemFile(locKey, typeKey, loc string) ([]byte, error) {
	if t, ok := p.get(typeKey); ok && !strings.EqualFold(t, "PEM") {
		return nil, p.errorf(typeKey, "gflink reads PEM files only; convert the store (keytool -exportcert -rfc, or openssl pkcs12 -nodes) and set %s=PEM", typeKey)
	}
	b, err := os.ReadFile(loc)
	if err != nil {
		return nil, p.errorf(locKey, "%v", err)
	}
	if blk, _ := pem.Decode(b); blk == nil {
		return nil, p.errorf(locKey, "not a PEM file (a JKS or PKCS12 store? gflink reads PEM only: convert it with keytool -exportcert -rfc or openssl pkcs12 -nodes)")
	}
	return b, nil
}
