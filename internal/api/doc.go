// Package api defines the types a job's functions, sources and sinks are
// written against: Collector, the function interfaces, Context and
// RuntimeContext, Source and Sink. Package stream exposes them to job
// authors; the runtime (package engine and below) implements them. It
// depends on nothing of the runtime, so that the job API and the runtime
// can both build on it without one importing the other; the few functions
// here that only the runtime calls (NewContext, SetTimeDomain,
// NewRuntimeContext) are out of users' reach because the package is
// internal.
package api
