package checkpoint

import (
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/engine/config"
)

// TestUnalignedKeys: the unaligned-checkpoint keys are read (current and
// old names), refused with AT_LEAST_ONCE naming both keys, and never
// ignored silently while gflink's checkpoints stay aligned.
func TestUnalignedKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kv      map[string]string
		err     []string // substrings of the error; nil: no error
		warning string   // substring of a warning; "": none
		// unaligned and timeout are the Config read, without an error.
		unaligned bool
		timeout   time.Duration
	}{
		{name: "off by default", kv: map[string]string{"execution.checkpointing.interval": "1 s"}},
		{name: "on", kv: map[string]string{"execution.checkpointing.interval": "1 s", "execution.checkpointing.unaligned.enabled": "true"},
			unaligned: true},
		{name: "old key", kv: map[string]string{"execution.checkpointing.interval": "1 s", "execution.checkpointing.unaligned": "TRUE"},
			unaligned: true},
		{name: "with timeout", kv: map[string]string{"execution.checkpointing.unaligned.enabled": "true", "execution.checkpointing.alignment-timeout": "30 ms"},
			unaligned: true, timeout: 30 * time.Millisecond},
		{name: "at least once", kv: map[string]string{"execution.checkpointing.interval": "1 s", "execution.checkpointing.unaligned.enabled": "true",
			"execution.checkpointing.mode": "AT_LEAST_ONCE"},
			err: []string{"execution.checkpointing.unaligned.enabled", "execution.checkpointing.mode: EXACTLY_ONCE", "AT_LEAST_ONCE"}},
		{name: "concurrent", kv: map[string]string{"execution.checkpointing.unaligned.enabled": "true", "execution.checkpointing.max-concurrent-checkpoints": "2"},
			err: []string{"execution.checkpointing.unaligned.enabled", "execution.checkpointing.max-concurrent-checkpoints: 1 (it is 2)"}},
		{name: "not a bool", kv: map[string]string{"execution.checkpointing.unaligned.enabled": "yes"},
			err: []string{"execution.checkpointing.unaligned.enabled", "yes"}},
		{name: "timeout without unaligned", kv: map[string]string{"execution.checkpointing.interval": "1 s", "execution.checkpointing.alignment-timeout": "100 ms"},
			warning: "no effect without"},
		{name: "negative timeout", kv: map[string]string{"execution.checkpointing.aligned-checkpoint-timeout": "-1 s"},
			err: []string{"execution.checkpointing.aligned-checkpoint-timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.New()
			for k, v := range tc.kv {
				c.SetString(k, v, "test")
			}
			cfg, warnings, err := ConfigFrom(c)
			if tc.err == nil && err != nil {
				t.Fatalf("error %v; want none", err)
			}
			if err == nil && (cfg.Unaligned != tc.unaligned || cfg.AlignedTimeout != tc.timeout) {
				t.Fatalf("unaligned %v, timeout %v; want %v, %v", cfg.Unaligned, cfg.AlignedTimeout, tc.unaligned, tc.timeout)
			}
			for _, s := range tc.err {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Fatalf("error %v; want one that says %q", err, s)
				}
			}
			got := strings.Join(warnings, "\n")
			if tc.warning == "" && tc.err == nil && got != "" {
				t.Fatalf("warnings %q; want none", got)
			}
			if !strings.Contains(got, tc.warning) {
				t.Fatalf("warnings %q; want one that says %q", got, tc.warning)
			}
		})
	}
}
