package network

// ShipStrategy is how records of an edge go from the sending subtasks to
// the receiving ones; String gives Flink's name for it in the job plan.
type ShipStrategy int

func (p ShipStrategy) String() string {
	return [...]string{"FORWARD", "HASH", "REBALANCE", "SHUFFLE", "BROADCAST"}[p]
}

const (
	ShipForward ShipStrategy = iota
	ShipHash
	ShipRebalance
	ShipShuffle
	ShipBroadcast
)
