package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gflink/gflink/cli"
	"github.com/gflink/gflink/stream"
)

// TestTotals runs the job from Go with Execute and checks its final totals.
func TestTotals(t *testing.T) {
	var out bytes.Buffer
	env, err := stream.NewEnvironment(stream.Options{Stdout: &out,
		Config: map[string]string{"execution.checkpointing.interval": "100 ms"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Totals().Build(env, nil); err != nil {
		t.Fatal(err)
	}
	res, err := env.Execute(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	if res.Status != "FINISHED" || res.JobName != "Totals" {
		t.Errorf("result %+v", res)
	}
	for _, want := range []string{"(alice,3)", "(alice,7)", "(bob,3)", "(carol,1)"} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
}

// TestUsage checks the command line rejects unknown arguments of the job
// with a usage error (exit 2).
func TestUsage(t *testing.T) {
	if code := cli.Run([]string{"run", "totals", "--bogus"}, Totals()); code != 2 {
		t.Fatalf("exit %d, want 2 (a usage error)", code)
	}
}
