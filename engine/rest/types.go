package rest

import "github.com/gflink/gflink/savepoint"

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
	ID          int64  `json:"id"`
	Type        string `json:"checkpoint_type"`
	Format      string `json:"format,omitempty"`
	Path        string `json:"external_path"`
	Completed   int64  `json:"completion_timestamp"`
	Size        int64  `json:"state_size"`
	Added       int64  `json:"checkpointed_size"`
	Incremental bool   `json:"incremental,omitempty"`
	// Changelog sums up a checkpoint of the changelog state backend.
	Changelog *savepoint.ChangelogSummary `json:"changelog,omitempty"`
	Owned     bool                        `json:"owned"`
	Restored  bool                        `json:"restored"`
}

// ClusterOverview is GET /overview: one job, one "task manager".
type ClusterOverview struct {
	TaskManagers        int    `json:"taskmanagers"`
	SlotsTotal          int    `json:"slots-total"`
	SlotsAvailable      int    `json:"slots-available"`
	JobsRunning         int    `json:"jobs-running"`
	JobsFinished        int    `json:"jobs-finished"`
	JobsCancelled       int    `json:"jobs-cancelled"`
	JobsFailed          int    `json:"jobs-failed"`
	FlinkVersion        string `json:"flink-version"`
	FlinkCommit         string `json:"flink-commit"`
	SlotsFreeAndBlocked int    `json:"slots-free-and-blocked"`
	TaskManagersBlocked int    `json:"taskmanagers-blocked"`
}

// DashboardConfiguration is GET /config.
type DashboardConfiguration struct {
	RefreshInterval int64             `json:"refresh-interval"`
	TimezoneName    string            `json:"timezone-name"`
	TimezoneOffset  int               `json:"timezone-offset"`
	FlinkVersion    string            `json:"flink-version"`
	FlinkRevision   string            `json:"flink-revision"`
	Features        DashboardFeatures `json:"features"`
}

// DashboardFeatures are the dashboard's switches.
type DashboardFeatures struct {
	WebSubmit  bool `json:"web-submit"`
	WebCancel  bool `json:"web-cancel"`
	WebRescale bool `json:"web-rescale"`
	WebHistory bool `json:"web-history"`
}

// JobIDsWithStatus is GET /jobs.
type JobIDsWithStatus struct {
	Jobs []JobIDWithStatus `json:"jobs"`
}

// JobIDWithStatus is one job of GET /jobs.
type JobIDWithStatus struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// JobStatusInfo is GET /jobs/:jobid/status.
type JobStatusInfo struct {
	Status string `json:"status"`
}

// JobDetails is GET /jobs/:jobid.
type JobDetails struct {
	JID            string           `json:"jid"`
	Name           string           `json:"name"`
	IsStoppable    bool             `json:"isStoppable"`
	State          string           `json:"state"`
	JobType        string           `json:"job-type"`
	StartTime      int64            `json:"start-time"`
	EndTime        int64            `json:"end-time"`
	Duration       int64            `json:"duration"`
	MaxParallelism int              `json:"maxParallelism"`
	Now            int64            `json:"now"`
	Timestamps     map[string]int64 `json:"timestamps"`
	Vertices       []JobVertex      `json:"vertices"`
	StatusCounts   map[string]int   `json:"status-counts"`
	Plan           JobPlan          `json:"plan"`
}

// JobVertex is one vertex of JobDetails.
type JobVertex struct {
	ID             string         `json:"id"`
	Name           string         `json:"name"`
	MaxParallelism int            `json:"maxParallelism"`
	Parallelism    int            `json:"parallelism"`
	Status         string         `json:"status"`
	StartTime      int64          `json:"start-time"`
	EndTime        int64          `json:"end-time"`
	Duration       int64          `json:"duration"`
	Tasks          map[string]int `json:"tasks"`
	Metrics        VertexMetrics  `json:"metrics"`
}

// VertexMetrics are a vertex's I/O metrics; gflink does not measure them
// and reports zeros, as complete.
type VertexMetrics struct {
	ReadBytes                    int64 `json:"read-bytes"`
	ReadBytesComplete            bool  `json:"read-bytes-complete"`
	WriteBytes                   int64 `json:"write-bytes"`
	WriteBytesComplete           bool  `json:"write-bytes-complete"`
	ReadRecords                  int64 `json:"read-records"`
	ReadRecordsComplete          bool  `json:"read-records-complete"`
	WriteRecords                 int64 `json:"write-records"`
	WriteRecordsComplete         bool  `json:"write-records-complete"`
	AccumulatedBackpressuredTime int64 `json:"accumulated-backpressured-time"`
	AccumulatedIdleTime          int64 `json:"accumulated-idle-time"`
	AccumulatedBusyTime          int64 `json:"accumulated-busy-time"`
}

// JobPlan is the plan of JobDetails.
type JobPlan struct {
	JID   string        `json:"jid"`
	Name  string        `json:"name"`
	Type  string        `json:"type"`
	Nodes []JobPlanNode `json:"nodes"`
}

// JobPlanNode is one node of a JobPlan.
type JobPlanNode struct {
	ID               string `json:"id"`
	Parallelism      int    `json:"parallelism"`
	Operator         string `json:"operator"`
	OperatorStrategy string `json:"operator_strategy"`
	Description      string `json:"description"`
	// Inputs are the node's input edges (absent for a source).
	Inputs []JobPlanInput `json:"inputs,omitempty"`
}

// JobPlanInput is an input edge of a JobPlanNode, as Flink writes it.
type JobPlanInput struct {
	Num          int    `json:"num"`
	ID           string `json:"id"`
	ShipStrategy string `json:"ship_strategy"`
	Exchange     string `json:"exchange"`
}

// CheckpointStatistics is one checkpoint of GET /jobs/:jobid/checkpoints
// and GET /jobs/:jobid/checkpoints/details/:checkpointid. Absent values are
// left out rather than written as null: Flink's OpenAPI description
// declares none of these fields nullable.
type CheckpointStatistics struct {
	ClassName               string         `json:"className"`
	ID                      int64          `json:"id"`
	Status                  string         `json:"status"`
	IsSavepoint             bool           `json:"is_savepoint"`
	SavepointFormat         string         `json:"savepointFormat,omitempty"`
	TriggerTimestamp        int64          `json:"trigger_timestamp"`
	LatestAckTimestamp      int64          `json:"latest_ack_timestamp"`
	CheckpointedSize        int64          `json:"checkpointed_size"`
	StateSize               int64          `json:"state_size"`
	EndToEndDuration        int64          `json:"end_to_end_duration"`
	AlignmentBuffered       int64          `json:"alignment_buffered"`
	ProcessedData           int64          `json:"processed_data"`
	PersistedData           int64          `json:"persisted_data"`
	NumSubtasks             int            `json:"num_subtasks"`
	NumAcknowledgedSubtasks int            `json:"num_acknowledged_subtasks"`
	CheckpointType          string         `json:"checkpoint_type"`
	Tasks                   map[string]any `json:"tasks"`
	// Completed checkpoints only.
	ExternalPath *string `json:"external_path,omitempty"`
	Discarded    *bool   `json:"discarded,omitempty"`
	// Failed checkpoints only.
	FailureTimestamp *int64  `json:"failure_timestamp,omitempty"`
	FailureMessage   *string `json:"failure_message,omitempty"`
}

// TaskCheckpointStatistics is one job vertex's part in a checkpoint.
type TaskCheckpointStatistics struct {
	ID                      int64  `json:"id"`
	Status                  string `json:"status"`
	LatestAckTimestamp      int64  `json:"latest_ack_timestamp"`
	CheckpointedSize        int64  `json:"checkpointed_size"`
	StateSize               int64  `json:"state_size"`
	EndToEndDuration        int64  `json:"end_to_end_duration"`
	AlignmentBuffered       int64  `json:"alignment_buffered"`
	ProcessedData           int64  `json:"processed_data"`
	PersistedData           int64  `json:"persisted_data"`
	NumSubtasks             int    `json:"num_subtasks"`
	NumAcknowledgedSubtasks int    `json:"num_acknowledged_subtasks"`
}

// TaskCheckpointStatisticsWithSubtaskDetails is GET
// /jobs/:jobid/checkpoints/details/:checkpointid/subtasks/:vertexid.
type TaskCheckpointStatisticsWithSubtaskDetails struct {
	TaskCheckpointStatistics
	Subtasks []SubtaskCheckpointStatistics `json:"subtasks"`
}

// SubtaskCheckpointStatistics is a subtask's part in a checkpoint (Flink's
// CompletedSubtaskCheckpointStatistics; gflink lists acknowledged subtasks).
type SubtaskCheckpointStatistics struct {
	ClassName           string              `json:"className"`
	Index               int                 `json:"index"`
	Status              string              `json:"status"`
	AckTimestamp        int64               `json:"ack_timestamp"`
	EndToEndDuration    int64               `json:"end_to_end_duration"`
	CheckpointedSize    int64               `json:"checkpointed_size"`
	StateSize           int64               `json:"state_size"`
	Checkpoint          CheckpointDuration  `json:"checkpoint"`
	Alignment           CheckpointAlignment `json:"alignment"`
	StartDelay          int64               `json:"start_delay"`
	UnalignedCheckpoint bool                `json:"unaligned_checkpoint"`
	Aborted             bool                `json:"aborted"`
}

// CheckpointDuration is a subtask's synchronous and asynchronous parts, in ms.
type CheckpointDuration struct {
	Sync  int64 `json:"sync"`
	Async int64 `json:"async"`
}

// CheckpointAlignment is a subtask's alignment: duration in ms, and the
// bytes of records in flight persisted (unaligned).
type CheckpointAlignment struct {
	Buffered  int64 `json:"buffered"`
	Processed int64 `json:"processed"`
	Persisted int64 `json:"persisted"`
	Duration  int64 `json:"duration"`
}

// CheckpointingStatistics is GET /jobs/:jobid/checkpoints.
type CheckpointingStatistics struct {
	// Retained is gflink's extension: what the job keeps and whether it
	// owns it (may delete it). Flink's description allows extra properties.
	Retained []RetainedJSON         `json:"retained"`
	Counts   CheckpointCounts       `json:"counts"`
	Summary  CheckpointSummaries    `json:"summary"`
	Latest   LatestCheckpoints      `json:"latest"`
	History  []CheckpointStatistics `json:"history"`
}

// CheckpointCounts counts a job's checkpoints by outcome.
type CheckpointCounts struct {
	Restored   int64 `json:"restored"`
	Total      int64 `json:"total"`
	InProgress int64 `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
}

// StatsSummary is min, max, average and percentiles of one figure.
type StatsSummary struct {
	Min  int64   `json:"min"`
	Max  int64   `json:"max"`
	Avg  int64   `json:"avg"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

// CheckpointSummaries summarise completed checkpoints.
type CheckpointSummaries struct {
	CheckpointedSize  StatsSummary `json:"checkpointed_size"`
	StateSize         StatsSummary `json:"state_size"`
	EndToEndDuration  StatsSummary `json:"end_to_end_duration"`
	AlignmentBuffered StatsSummary `json:"alignment_buffered"`
	ProcessedData     StatsSummary `json:"processed_data"`
	PersistedData     StatsSummary `json:"persisted_data"`
}

// LatestCheckpoints are the latest checkpoint of each outcome, when any.
type LatestCheckpoints struct {
	Completed *CheckpointStatistics `json:"completed,omitempty"`
	Savepoint *CheckpointStatistics `json:"savepoint,omitempty"`
	Failed    *CheckpointStatistics `json:"failed,omitempty"`
	Restored  *RestoredCheckpoint   `json:"restored,omitempty"`
}

// RestoredCheckpoint is the snapshot the job was restored from.
type RestoredCheckpoint struct {
	ID               int64  `json:"id"`
	RestoreTimestamp int64  `json:"restore_timestamp"`
	IsSavepoint      bool   `json:"is_savepoint"`
	ExternalPath     string `json:"external_path"`
}

// CheckpointConfigInfo is GET /jobs/:jobid/checkpoints/config.
type CheckpointConfigInfo struct {
	Mode                                     string                `json:"mode"`
	Interval                                 int64                 `json:"interval"`
	Timeout                                  int64                 `json:"timeout"`
	MinPause                                 int64                 `json:"min_pause"`
	MaxConcurrent                            int                   `json:"max_concurrent"`
	Externalization                          ExternalizationConfig `json:"externalization"`
	StateBackend                             string                `json:"state_backend"`
	CheckpointStorage                        string                `json:"checkpoint_storage"`
	UnalignedCheckpoints                     bool                  `json:"unaligned_checkpoints"`
	TolerableFailedCheckpoints               int                   `json:"tolerable_failed_checkpoints"`
	AlignedCheckpointTimeout                 int64                 `json:"aligned_checkpoint_timeout"`
	CheckpointsAfterTasksFinish              bool                  `json:"checkpoints_after_tasks_finish"`
	StateChangelogEnabled                    bool                  `json:"state_changelog_enabled"`
	ChangelogPeriodicMaterializationInterval int64                 `json:"changelog_periodic_materialization_interval"`
	ChangelogStorage                         string                `json:"changelog_storage"`
}

// ExternalizationConfig says whether checkpoints are retained.
type ExternalizationConfig struct {
	Enabled              bool `json:"enabled"`
	DeleteOnCancellation bool `json:"delete_on_cancellation"`
}

// JobExceptions is GET /jobs/:jobid/exceptions.
type JobExceptions struct {
	ExceptionHistory ExceptionHistory `json:"exceptionHistory"`
}

// ExceptionHistory lists a job's failures, newest first.
type ExceptionHistory struct {
	Entries   []ExceptionEntry `json:"entries"`
	Truncated bool             `json:"truncated"`
}

// ExceptionEntry is one failure.
type ExceptionEntry struct {
	ExceptionName        string            `json:"exceptionName"`
	Stacktrace           string            `json:"stacktrace"`
	Timestamp            int64             `json:"timestamp"`
	TaskName             string            `json:"taskName"`
	FailureLabels        map[string]string `json:"failureLabels"`
	ConcurrentExceptions []ExceptionEntry  `json:"concurrentExceptions"`
}

// JobExecutionResultResponse is GET /jobs/:jobid/execution-result.
type JobExecutionResultResponse struct {
	Status QueueStatus         `json:"status"`
	Result *JobExecutionResult `json:"job-execution-result,omitempty"`
}

// JobExecutionResult is how an ended job ended.
type JobExecutionResult struct {
	ID                 string         `json:"id"`
	ApplicationStatus  string         `json:"application-status"`
	AccumulatorResults map[string]any `json:"accumulator-results"`
	NetRuntime         int64          `json:"net-runtime"`
	FailureCause       *FailureCause  `json:"failure-cause,omitempty"`
}
