package config

import (
	"slices"
	"strings"
	"testing"
)

func TestIsSensitive(t *testing.T) {
	for key, want := range map[string]bool{
		"properties.sasl.jaas.config": true,
		"sasl.password":               true,
		"ssl.keystore.password":       true,
		"s3.secret-key":               true,
		"high-availability.zookeeper.client.digest-credentials": true,
		"token":                            true,
		"Security.SSL.Truststore-Password": true,
		"state.checkpoints.dir":            false,
		"sasl.mechanism":                   false,
		"group":                            false,
	} {
		if got := IsSensitive(key); got != want {
			t.Errorf("IsSensitive(%q) = %v; want %v", key, got, want)
		}
	}
}

func TestMaskArgs(t *testing.T) {
	in := []string{
		"--input", "kafka://b:9092/lines?group=wc&sasl.password=hunter2&properties.sasl.jaas.config=x%3By#frag",
		"--properties.sasl.jaas.config", `org.apache.kafka.common.security.scram.ScramLoginModule required username="wc" password="hunter2";`,
		"--sasl.password=hunter2", "--token", "t0k3n", "-Dhigh-availability.zookeeper.client.digest-credentials=u:hunter2",
		"-D", "s3.secret-key=hunter2", "-D", "s3.access-key=AKIA", "--bounded", "--group", "wc",
		"-password", "hunter2", "kafka://wc:hunter2@b:9092/t", "-D",
	}
	want := []string{
		"--input", "kafka://b:9092/lines?group=wc&sasl.password=******&properties.sasl.jaas.config=******#frag",
		"--properties.sasl.jaas.config", "******",
		"--sasl.password=******", "--token", "******", "-Dhigh-availability.zookeeper.client.digest-credentials=******",
		"-D", "s3.secret-key=******", "-D", "s3.access-key=AKIA", "--bounded", "--group", "wc",
		"-password", "******", "kafka://wc:******@b:9092/t", "-D",
	}
	got := MaskArgs(in)
	if !slices.Equal(got, want) {
		t.Errorf("MaskArgs:\n got %q\nwant %q", got, want)
	}
	if strings.Contains(strings.Join(got, " "), "hunter2") {
		t.Error("a password survived")
	}
	if in[1] == want[1] {
		t.Error("MaskArgs changed its input")
	}
}

func TestValueErrorMasksSecrets(t *testing.T) {
	c := New()
	c.SetString("high-availability.zookeeper.client.digest-credentials", "hunter2", "-D")
	opt := String("high-availability.zookeeper.client.digest-credentials").WithCheck(func(s string) error {
		return &struct{ error }{errorString("'" + s + "' is not user:password")}
	})
	err := opt.Check(c)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), HiddenContent) {
		t.Errorf("error %v; want the value masked", err)
	}
	// A value too short to be a secret leaves the message readable.
	c.SetString("high-availability.zookeeper.client.digest-credentials", "i", "-D")
	if err := opt.Check(c); err == nil || !strings.Contains(err.Error(), "is not user:password") {
		t.Errorf("error %v; want the reason intact", err)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// TestDeprecatedKeyIsCheckedToo: a bad value under a deprecated key is an
// error even when the current key is also set (and wins).
func TestDeprecatedKeyIsCheckedToo(t *testing.T) {
	opt := Duration("execution.checkpointing.interval").WithDeprecatedKeys("execution.checkpointing.interval-old")
	c := New()
	c.SetString("execution.checkpointing.interval", "10 s", "-D")
	c.SetString("execution.checkpointing.interval-old", "often", "-D")
	if v, err := opt.Get(c); err != nil || v.Seconds() != 10 {
		t.Fatalf("Get: %v, %v; want the current key's 10 s", v, err)
	}
	err := Validate(c, []AnyOption{opt})
	if err == nil || !strings.Contains(err.Error(), "'execution.checkpointing.interval-old'") || !strings.Contains(err.Error(), "'often'") {
		t.Fatalf("Validate: %v; want an error naming the deprecated key and its value", err)
	}
}
