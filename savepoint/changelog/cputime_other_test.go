//go:build !unix

package changelog_test

import "time"

func processCPU() time.Duration { return 0 }

const haveCPUTime = false
