package bpf

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// MapType is a map's kind (enum bpf_map_type).
type MapType uint32

// The map types the agent makes.
const (
	Hash           MapType = 1
	Array          MapType = 2
	PerfEventArray MapType = 4
)

func (t MapType) String() string {
	switch t {
	case Hash:
		return "hash"
	case Array:
		return "array"
	case PerfEventArray:
		return "perf_event_array"
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// MapSpec is a map to create.
type MapSpec struct {
	Name       string // at most 15 bytes of [A-Za-z0-9_.]
	Type       MapType
	KeySize    uint32
	ValueSize  uint32
	MaxEntries uint32
	Flags      uint32 // BPF_F_MMAPABLE...
}

// Map is a map the kernel made, held by its descriptor.
type Map struct {
	fd        int
	name      string
	typ       MapType
	keySize   uint32
	valueSize uint32
}

// mapCreateAttr is union bpf_attr for BPF_MAP_CREATE, as far as the
// name.
type mapCreateAttr struct {
	mapType, keySize, valueSize, maxEntries, flags, innerMapFD, numaNode uint32
	name                                                                 [objNameLen]byte
}

// NewMap creates the map spec describes.
func NewMap(spec *MapSpec) (*Map, error) {
	obj := mapObject(spec.Name, spec.Type)
	name, err := objName(spec.Name)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", obj, err)
	}
	attr := mapCreateAttr{mapType: uint32(spec.Type), keySize: spec.KeySize, valueSize: spec.ValueSize,
		maxEntries: spec.MaxEntries, flags: spec.Flags, name: name}
	fd, err := bpf(cmdMapCreate, &attr)
	if err != nil {
		return nil, &Error{Op: "create", Object: obj, Errno: err}
	}
	return &Map{fd: fd, name: spec.Name, typ: spec.Type, keySize: spec.KeySize, valueSize: spec.ValueSize}, nil
}

// FD is the map's descriptor, -1 once closed.
func (m *Map) FD() int { return m.fd }

// Close lets go of the map's descriptor: the kernel frees the map when
// no program or other descriptor holds it.
func (m *Map) Close() error {
	return closeFD(&m.fd)
}

// MapUpdateFlags say what an update may do (BPF_ANY...).
type MapUpdateFlags uint64

const (
	// UpdateAny creates the element or replaces it.
	UpdateAny MapUpdateFlags = 0
	// UpdateNoExist creates the element and fails with ErrKeyExist
	// when the key is there.
	UpdateNoExist MapUpdateFlags = 1
	// UpdateExist replaces the element and fails with ErrKeyNotExist
	// when the key is not there.
	UpdateExist MapUpdateFlags = 2
)

// elemAttr is union bpf_attr for the element commands.
type elemAttr struct {
	mapFD uint32
	_     uint32
	key   pointer
	value pointer
	flags uint64
}

// Update sets the value of key: each a uint32, a uint64 or a []byte of
// the map's key and value size.
func (m *Map) Update(key, value any, flags MapUpdateFlags) error {
	k, err := m.bytes("key", key, m.keySize)
	if err != nil {
		return err
	}
	v, err := m.bytes("value", value, m.valueSize)
	if err != nil {
		return err
	}
	attr := elemAttr{mapFD: uint32(m.fd), key: ptrToBytes(k), value: ptrToBytes(v), flags: uint64(flags)}
	if _, err := bpf(cmdMapUpdateElem, &attr); err != nil {
		return m.error("update", err)
	}
	return nil
}

// Lookup copies key's value into value, a []byte of the map's value
// size.
func (m *Map) Lookup(key any, value []byte) error {
	k, err := m.bytes("key", key, m.keySize)
	if err != nil {
		return err
	}
	if uint32(len(value)) != m.valueSize {
		return fmt.Errorf("lookup in map %s: a value of %d bytes, want %d", m.name, len(value), m.valueSize)
	}
	attr := elemAttr{mapFD: uint32(m.fd), key: ptrToBytes(k), value: ptrToBytes(value)}
	if _, err := bpf(cmdMapLookupElem, &attr); err != nil {
		return m.error("lookup in", err)
	}
	return nil
}

// Delete removes key (a perf event array's entry lets go of its event).
func (m *Map) Delete(key any) error {
	k, err := m.bytes("key", key, m.keySize)
	if err != nil {
		return err
	}
	attr := elemAttr{mapFD: uint32(m.fd), key: ptrToBytes(k)}
	if _, err := bpf(cmdMapDeleteElem, &attr); err != nil {
		return m.error("delete from", err)
	}
	return nil
}

func (m *Map) error(op string, errno error) error {
	e := &Error{Op: op, Object: mapObject(m.name, m.typ), Errno: errno}
	switch errno {
	case unix.ENOENT:
		e.is = ErrKeyNotExist
	case unix.EEXIST:
		e.is = ErrKeyExist
	}
	return e
}

// mapObject names a map in an Error, as "map pe_prev (array)".
func mapObject(name string, t MapType) string { return fmt.Sprintf("map %s (%s)", name, t) }

// bytes is v, a key or value, in the host's byte order, checked against
// the map's size for it.
func (m *Map) bytes(what string, v any, size uint32) ([]byte, error) {
	var b []byte
	switch v := v.(type) {
	case uint32:
		b = binary.NativeEndian.AppendUint32(nil, v)
	case uint64:
		b = binary.NativeEndian.AppendUint64(nil, v)
	case []byte:
		b = v
	default:
		return nil, fmt.Errorf("map %s: a %s of type %T, want uint32, uint64 or []byte", m.name, what, v)
	}
	if uint32(len(b)) != size {
		return nil, fmt.Errorf("map %s: a %s of %d bytes, want %d", m.name, what, len(b), size)
	}
	return b, nil
}
