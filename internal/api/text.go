package api

// Appender is implemented by records that render themselves as text by
// appending to a byte slice: no fmt, no string per record. The print and
// file sinks use it when a record type has it. A type that has String too
// must append exactly the bytes String returns.
type Appender interface {
	AppendTo(dst []byte) []byte
}
