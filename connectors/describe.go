package connectors

import (
	"encoding/json"
	"fmt"
	"strings"
)

// snapshotInput says in a phrase what input a snapshot's source splits
// came from ("read the files a.txt, b.txt", "generated 1000 words (…)"), for
// a refusal that names both the snapshot's input and the job's. Splits of
// a kind it cannot read are described as such; legacy splits that do not
// record their input say so.
func snapshotInput(splits [][]byte) string {
	var files []string
	seen := map[string]bool{}
	for _, b := range splits {
		var sp textSplit
		if json.Unmarshal(b, &sp) == nil && sp.Path != "" {
			if !seen[sp.Path] {
				seen[sp.Path] = true
				files = append(files, sp.Path)
			}
			continue
		}
		if s, err := decodeGenSplit(b); err == nil {
			if s.legacy {
				return "generated words (a split of an older gflink, which does not record how many)"
			}
			return "generated " + describeText(s.text)
		}
		if _, _, total, ok := decodeElementsSplit(b); ok {
			if total == legacyTotal {
				return "read an in-memory input (a split of an older gflink, which does not record its size)"
			}
			return fmt.Sprintf("read an in-memory input of %d items (such as word count's built-in text)", total)
		}
		return "holds the state of a kind of source gflink does not know"
	}
	if len(files) == 0 {
		return "read nothing"
	}
	return "read the files " + strings.Join(files, ", ")
}

// inputMismatch is the refusal to restore splits into a source of another
// kind: it names both inputs.
func inputMismatch(splits [][]byte, this string) error {
	return fmt.Errorf("the snapshot's source %s; this job's %s", snapshotInput(splits), this)
}
