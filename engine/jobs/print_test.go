package jobs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine/config"
)

// The print ratio compares like with like: at parallelism 1 the engine's
// print sink writes exactly the bytes of handWrittenPrint, line for line
// in the same order.
func TestEnginePrintsTheLoopsBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "words.txt")
	var in bytes.Buffer
	g := &connectors.WordGenerator{Distinct: 300, Seed: 5, WordsPerLine: 10}
	var line []byte
	for i := range int64(5000) {
		line = g.Line(i, line)
		in.Write(line)
		in.WriteString("\n")
	}
	in.WriteString("To be, or NOT to be,--that is the question:--\n\n  ...x\n")
	if err := os.WriteFile(path, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var loop bytes.Buffer
	if err := handWrittenPrint(path, &loop); err != nil {
		t.Fatal(err)
	}
	var engine bytes.Buffer
	runWordCountJob(t, path, config.New(), &engine)
	if loop.Len() < 50000*len("(a,1)\n") {
		t.Fatalf("the loop printed %d bytes", loop.Len())
	}
	if !bytes.Equal(engine.Bytes(), loop.Bytes()) {
		i := 0
		for i < min(engine.Len(), loop.Len()) && engine.Bytes()[i] == loop.Bytes()[i] {
			i++
		}
		t.Fatalf("the engine printed %d bytes, the loop %d; first difference at byte %d: engine %.40q, loop %.40q",
			engine.Len(), loop.Len(), i, engine.Bytes()[i:], loop.Bytes()[i:])
	}
}
