package checkpoint

import (
	"slices"
	"testing"
)

func TestSharedRegistryDeletesOnlyUnreferencedFiles(t *testing.T) {
	var r SharedRegistry
	r.Register(1, []string{"shared/a", "shared/b"})
	r.Register(2, []string{"shared/b", "shared/c"}) // incremental: b reused
	if free := r.Unregister(1); !slices.Equal(free, []string{"shared/a"}) {
		t.Fatalf("subsuming 1 frees %v; want [shared/a] (b is still used by 2)", free)
	}
	if !r.Referenced("shared/b") || r.Referenced("shared/a") {
		t.Fatal("references wrong after subsuming 1")
	}
	r.Register(3, []string{"shared/c", "shared/d"})
	if free := r.Unregister(2); !slices.Equal(free, []string{"shared/b"}) {
		t.Fatalf("subsuming 2 frees %v; want [shared/b]", free)
	}
	if free := r.Unregister(2); len(free) != 0 {
		t.Fatalf("unregistering twice frees %v", free)
	}
	if got := r.Files(); !slices.Equal(got, []string{"shared/c", "shared/d"}) {
		t.Fatalf("files %v", got)
	}
	if free := r.Unregister(3); !slices.Equal(free, []string{"shared/c", "shared/d"}) {
		t.Fatalf("subsuming 3 frees %v", free)
	}
}

// A file referred to by several retained checkpoints (num-retained > 1)
// goes with the last of them, in whatever order they go.
func TestSharedRegistryAnyOrder(t *testing.T) {
	for _, order := range [][]int64{{1, 2, 3}, {3, 2, 1}, {2, 1, 3}} {
		var r SharedRegistry
		for _, id := range []int64{1, 2, 3} {
			r.Register(id, []string{"shared/x"})
		}
		for i, id := range order {
			free := r.Unregister(id)
			if last := i == len(order)-1; last != (len(free) == 1) {
				t.Fatalf("order %v: unregistering %d frees %v", order, id, free)
			}
		}
	}
}
