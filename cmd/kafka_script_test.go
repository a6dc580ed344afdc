package cmd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gflink/gflink/connectors/kafka"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// scriptKafkas are the Kafka clusters the running scripts started, with
// the client options that reach them.
var scriptKafkas = struct {
	sync.Mutex
	m map[*testscript.TestScript]*scriptKafka
}{m: map[*testscript.TestScript]*scriptKafka{}}

type scriptKafka struct {
	brokers []string
	opts    []kgo.Opt
}

// cmdKafka drives an in-process Kafka (franz-go's kfake, over real TCP on
// a free loopback port) from a script:
//
//	kafka start [-tls] [-sasl MECHANISM:user:password] topic:partitions...
//	kafka produce topic file
//	kafka read [-uncommitted] topic
//
// start sets $KAFKA to the broker's address and stops the cluster when the
// script ends; -tls serves TLS with a fresh CA written to
// $WORK/kafka-ca.pem, -sasl requires that user. produce writes the file's
// lines round robin; read prints every value up to the topic's end as a
// read_committed (or read_uncommitted) consumer sees it.
func cmdKafka(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: kafka start|produce|read ...")
	}
	scriptKafkas.Lock()
	k := scriptKafkas.m[ts]
	scriptKafkas.Unlock()
	if args[0] != "start" && k == nil {
		ts.Fatalf("kafka %s before kafka start", args[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch args[0] {
	case "start":
		startScriptKafka(ts, args[1:])
	case "produce":
		if len(args) != 3 {
			ts.Fatalf("usage: kafka produce topic file")
		}
		f, err := os.Open(ts.MkAbs(args[2]))
		ts.Check(err)
		defer f.Close()
		_, err = kafka.ProduceLines(ctx, k.brokers, args[1], f, k.opts...)
		ts.Check(err)
	case "read":
		committed := args[1] != "-uncommitted"
		topic := args[len(args)-1]
		vals, err := kafka.ReadToEnd(ctx, k.brokers, topic, committed, k.opts...)
		ts.Check(err)
		for _, v := range vals {
			fmt.Fprintln(ts.Stdout(), v)
		}
	default:
		ts.Fatalf("usage: kafka start|produce|read ...")
	}
}

func startScriptKafka(ts *testscript.TestScript, args []string) {
	kopts := []kfake.Opt{kfake.NumBrokers(1)}
	var copts []kgo.Opt
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-tls":
			ca, server := testCertificates(ts)
			kopts = append(kopts, kfake.TLS(server))
			copts = append(copts, kgo.DialTLSConfig(&tls.Config{RootCAs: ca, MinVersion: tls.VersionTLS12}))
		case "-sasl":
			mech, userpass, _ := strings.Cut(args[1], ":")
			user, pass, _ := strings.Cut(userpass, ":")
			kopts = append(kopts, kfake.EnableSASL(), kfake.Superuser(mech, user, pass))
			switch mech {
			case "PLAIN":
				copts = append(copts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
			case "SCRAM-SHA-256":
				copts = append(copts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
			default:
				ts.Fatalf("kafka start -sasl: PLAIN or SCRAM-SHA-256")
			}
			args = args[1:]
		default:
			ts.Fatalf("kafka start: unknown flag %s", args[0])
		}
		args = args[1:]
	}
	for _, tp := range args {
		topic, n, _ := strings.Cut(tp, ":")
		parts, err := strconv.Atoi(n)
		if err != nil {
			ts.Fatalf("kafka start: expected topic:partitions, got %q", tp)
		}
		kopts = append(kopts, kfake.SeedTopics(int32(parts), topic))
	}
	c, err := kfake.NewCluster(kopts...)
	ts.Check(err)
	k := &scriptKafka{brokers: c.ListenAddrs(), opts: copts}
	scriptKafkas.Lock()
	scriptKafkas.m[ts] = k
	scriptKafkas.Unlock()
	ts.Defer(func() {
		c.Close()
		scriptKafkas.Lock()
		delete(scriptKafkas.m, ts)
		scriptKafkas.Unlock()
	})
	ts.Setenv("KAFKA", strings.Join(k.brokers, ","))
}

// testCertificates makes a CA, writes it to $WORK/kafka-ca.pem, and
// returns it with a server configuration for 127.0.0.1 signed by it.
func testCertificates(ts *testscript.TestScript) (*x509.CertPool, *tls.Config) {
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		ts.Check(err)
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gflink test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ts.Check(err)
	caCert, err := x509.ParseCertificate(caDER)
	ts.Check(err)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	ts.Check(err)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	ts.Check(os.WriteFile(ts.MkAbs("kafka-ca.pem"), caPEM, 0o600))
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, &tls.Config{MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}}
}
