package rest

// JSON bodies of Flink's REST API, with Flink's field names.

// ErrorBody is every error response: {"errors": [...]}.
type ErrorBody struct {
	Errors []string `json:"errors"`
}

// TriggerResponse answers an asynchronous trigger.
type TriggerResponse struct {
	RequestID string `json:"request-id"`
}

// QueueStatus is an asynchronous operation's status.
type QueueStatus struct {
	ID string `json:"id"` // IN_PROGRESS or COMPLETED
}

// FailureCause is Flink's serialized exception.
type FailureCause struct {
	Class      string `json:"class"`
	StackTrace string `json:"stack-trace"`
}

// SavepointInfo is a savepoint, stop or disposal outcome.
type SavepointInfo struct {
	Location     string        `json:"location,omitempty"`
	FailureCause *FailureCause `json:"failure-cause,omitempty"`
}

// CheckpointInfo is a manual checkpoint's outcome (camelCase, as in Flink).
type CheckpointInfo struct {
	CheckpointID int64         `json:"checkpointId,omitempty"`
	FailureCause *FailureCause `json:"failureCause,omitempty"`
}

// AsyncResult is the body of a status poll. Operation is omitted while in
// progress.
type AsyncResult struct {
	Status    QueueStatus `json:"status"`
	Operation any         `json:"operation,omitempty"`
}

// SavepointTriggerRequest is POST /jobs/:jobid/savepoints.
type SavepointTriggerRequest struct {
	TargetDirectory *string `json:"target-directory,omitempty"`
	CancelJob       bool    `json:"cancel-job"`
	FormatType      string  `json:"formatType,omitempty"`
	TriggerID       string  `json:"triggerId,omitempty"`
}

// StopRequest is POST /jobs/:jobid/stop (camelCase, unlike savepoints).
type StopRequest struct {
	TargetDirectory *string `json:"targetDirectory,omitempty"`
	Drain           bool    `json:"drain"`
	FormatType      string  `json:"formatType,omitempty"`
	TriggerID       string  `json:"triggerId,omitempty"`
}

// CheckpointTriggerRequest is POST /jobs/:jobid/checkpoints.
type CheckpointTriggerRequest struct {
	CheckpointType string `json:"checkpointType,omitempty"`
	TriggerID      string `json:"triggerId,omitempty"`
}

// DisposalRequest is POST /savepoint-disposal.
type DisposalRequest struct {
	SavepointPath string `json:"savepoint-path"`
}

// JobOverview is one entry of GET /jobs/overview.
type JobOverview struct {
	JID              string         `json:"jid"`
	Name             string         `json:"name"`
	StartTime        int64          `json:"start-time"`
	EndTime          int64          `json:"end-time"`
	Duration         int64          `json:"duration"`
	State            string         `json:"state"`
	LastModification int64          `json:"last-modification"`
	Tasks            map[string]int `json:"tasks"`
}

// JobsOverview is GET /jobs/overview.
type JobsOverview struct {
	Jobs []JobOverview `json:"jobs"`
}

// RetainedJSON is one snapshot a job keeps or took, in gflink's extension of
// GET /jobs/:jobid/checkpoints.
type RetainedJSON struct {
	ID        int64  `json:"id"`
	Type      string `json:"checkpoint_type"`
	Format    string `json:"format,omitempty"`
	Path      string `json:"external_path"`
	Completed int64  `json:"completion_timestamp"`
	Size      int64  `json:"state_size"`
	Owned     bool   `json:"owned"`
	Restored  bool   `json:"restored"`
}
