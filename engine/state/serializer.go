package state

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/cespare/xxhash/v2"
)

// Serializer turns values into bytes for snapshots. The encoding is part of
// the canonical snapshot format: it must never change for a type that has
// been written. Restore decodes key groups on several goroutines, so
// Append and Decode must be safe for concurrent use (a stateless
// serializer is).
type Serializer[T any] interface {
	// Append appends v's encoding to dst.
	Append(dst []byte, v T) []byte
	// Decode reads one value from the front of src.
	Decode(src []byte) (v T, rest []byte, err error)
}

// KeySerializer also hashes keys. The hash decides a key's group, so it is
// part of the snapshot format too: it must be stable across processes and
// versions (which is why it is xxhash64, not Go's seeded map hash).
type KeySerializer[K any] interface {
	Serializer[K]
	Hash(k K) uint64
}

// ErrShortBuffer means a snapshot ended in the middle of a value.
var ErrShortBuffer = errors.New("state: truncated value")

// SerializerFor returns the built-in serializer for T: compact encodings for
// strings, integers, floats, booleans and byte slices, and JSON for
// everything else (structs must then round-trip through encoding/json).
func SerializerFor[T any]() KeySerializer[T] {
	var zero T
	var s any
	switch any(zero).(type) {
	case string:
		s = stringSerializer{}
	case int64:
		s = int64Serializer{}
	case int:
		s = intSerializer{}
	case int32:
		s = int32Serializer{}
	case uint64:
		s = uint64Serializer{}
	case float64:
		s = float64Serializer{}
	case bool:
		s = boolSerializer{}
	case []byte:
		s = bytesSerializer{}
	default:
		return jsonSerializer[T]{}
	}
	return s.(KeySerializer[T])
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func readBytes(src []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || uint64(len(src)-k) < n {
		return nil, nil, ErrShortBuffer
	}
	return src[k : k+int(n)], src[k+int(n):], nil
}

type stringSerializer struct{}

func (stringSerializer) Append(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}
func (stringSerializer) Decode(src []byte) (string, []byte, error) {
	b, rest, err := readBytes(src)
	return string(b), rest, err
}
func (stringSerializer) Hash(v string) uint64 { return xxhash.Sum64String(v) }

func hashUint64(v uint64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return xxhash.Sum64(b[:])
}

type int64Serializer struct{}

func (int64Serializer) Append(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }
func (int64Serializer) Decode(src []byte) (int64, []byte, error) {
	v, k := binary.Varint(src)
	if k <= 0 {
		return 0, nil, ErrShortBuffer
	}
	return v, src[k:], nil
}
func (int64Serializer) Hash(v int64) uint64 { return hashUint64(uint64(v)) }

type intSerializer struct{}

func (intSerializer) Append(dst []byte, v int) []byte { return binary.AppendVarint(dst, int64(v)) }
func (intSerializer) Decode(src []byte) (int, []byte, error) {
	v, rest, err := int64Serializer{}.Decode(src)
	return int(v), rest, err
}
func (intSerializer) Hash(v int) uint64 { return hashUint64(uint64(v)) }

type int32Serializer struct{}

func (int32Serializer) Append(dst []byte, v int32) []byte { return binary.AppendVarint(dst, int64(v)) }
func (int32Serializer) Decode(src []byte) (int32, []byte, error) {
	v, rest, err := int64Serializer{}.Decode(src)
	return int32(v), rest, err
}
func (int32Serializer) Hash(v int32) uint64 { return hashUint64(uint64(v)) }

type uint64Serializer struct{}

func (uint64Serializer) Append(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }
func (uint64Serializer) Decode(src []byte) (uint64, []byte, error) {
	v, k := binary.Uvarint(src)
	if k <= 0 {
		return 0, nil, ErrShortBuffer
	}
	return v, src[k:], nil
}
func (uint64Serializer) Hash(v uint64) uint64 { return hashUint64(v) }

type float64Serializer struct{}

func (float64Serializer) Append(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}
func (float64Serializer) Decode(src []byte) (float64, []byte, error) {
	if len(src) < 8 {
		return 0, nil, ErrShortBuffer
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(src)), src[8:], nil
}
func (float64Serializer) Hash(v float64) uint64 { return hashUint64(math.Float64bits(v)) }

type boolSerializer struct{}

func (boolSerializer) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}
func (boolSerializer) Decode(src []byte) (bool, []byte, error) {
	if len(src) < 1 {
		return false, nil, ErrShortBuffer
	}
	return src[0] != 0, src[1:], nil
}
func (boolSerializer) Hash(v bool) uint64 {
	if v {
		return hashUint64(1)
	}
	return hashUint64(0)
}

type bytesSerializer struct{}

func (bytesSerializer) Append(dst []byte, v []byte) []byte { return appendBytes(dst, v) }
func (bytesSerializer) Decode(src []byte) ([]byte, []byte, error) {
	b, rest, err := readBytes(src)
	return append([]byte(nil), b...), rest, err
}
func (bytesSerializer) Hash(v []byte) uint64 { return xxhash.Sum64(v) }

// jsonSerializer encodes any JSON-able type, length-prefixed.
type jsonSerializer[T any] struct{}

func (jsonSerializer[T]) Append(dst []byte, v T) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("state: cannot serialize %s as JSON: %v", reflect.TypeFor[T](), err))
	}
	return appendBytes(dst, b)
}
func (jsonSerializer[T]) Decode(src []byte) (T, []byte, error) {
	var v T
	b, rest, err := readBytes(src)
	if err != nil {
		return v, nil, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, nil, fmt.Errorf("state: decode %s: %w", reflect.TypeFor[T](), err)
	}
	return v, rest, nil
}
func (jsonSerializer[T]) Hash(v T) uint64 {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("state: cannot hash key %s as JSON: %v", reflect.TypeFor[T](), err))
	}
	return xxhash.Sum64(b)
}
