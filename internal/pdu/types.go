package pdu

import (
	"fmt"
	"strconv"
)

// Type is a PDU type code, the second word of every PDU header.
type Type int32

// PDU type codes (PCP's libpcp.h).
const (
	TypeError         Type = 0x7000
	TypeResult        Type = 0x7001
	TypeProfile       Type = 0x7002
	TypeFetch         Type = 0x7003
	TypeDescReq       Type = 0x7004
	TypeDesc          Type = 0x7005
	TypeInstanceReq   Type = 0x7006
	TypeInstance      Type = 0x7007
	TypeTextReq       Type = 0x7008
	TypeText          Type = 0x7009
	TypeControlReq    Type = 0x700a
	TypeCreds         Type = 0x700c
	TypePMNSIDs       Type = 0x700d
	TypePMNSNames     Type = 0x700e
	TypePMNSChild     Type = 0x700f
	TypePMNSTraverse  Type = 0x7010
	TypeAttr          Type = 0x7011
	TypeLabelReq      Type = 0x7012
	TypeLabel         Type = 0x7013
	TypeHighResFetch  Type = 0x7014
	TypeHighResResult Type = 0x7015
	TypeDescIDs       Type = 0x7016
	TypeDescs         Type = 0x7017
)

// typeNames is an array, not a map, so that it is data in the binary
// rather than a map every start builds.
var typeNames = [...]struct {
	t    Type
	name string
}{
	{TypeError, "ERROR"},
	{TypeResult, "RESULT"},
	{TypeProfile, "PROFILE"},
	{TypeFetch, "FETCH"},
	{TypeDescReq, "DESC_REQ"},
	{TypeDesc, "DESC"},
	{TypeInstanceReq, "INSTANCE_REQ"},
	{TypeInstance, "INSTANCE"},
	{TypeTextReq, "TEXT_REQ"},
	{TypeText, "TEXT"},
	{TypeControlReq, "CONTROL_REQ"},
	{TypeCreds, "CREDS"},
	{TypePMNSIDs, "PMNS_IDS"},
	{TypePMNSNames, "PMNS_NAMES"},
	{TypePMNSChild, "PMNS_CHILD"},
	{TypePMNSTraverse, "PMNS_TRAVERSE"},
	{TypeAttr, "ATTR"},
	{TypeLabelReq, "LABEL_REQ"},
	{TypeLabel, "LABEL"},
	{TypeHighResFetch, "HIGHRES_FETCH"},
	{TypeHighResResult, "HIGHRES_RESULT"},
	{TypeDescIDs, "DESC_IDS"},
	{TypeDescs, "DESCS"},
}

// String returns PCP's name for the type without the PDU_ prefix, e.g. "FETCH".
func (t Type) String() string {
	for _, n := range typeNames {
		if n.t == t {
			return n.name
		}
	}
	return fmt.Sprintf("TYPE_%#x", int32(t))
}

// PMID identifies a metric: 9 bits of domain, 12 of cluster, 10 of item.
type PMID uint32

// PMIDNull is PM_ID_NULL.
const PMIDNull PMID = 0xFFFFFFFF

// NewPMID packs a PMID; out-of-range parts are truncated to their bit width.
func NewPMID(domain, cluster, item int) PMID {
	return PMID(uint32(domain&0x1FF)<<22 | uint32(cluster&0xFFF)<<10 | uint32(item&0x3FF))
}

// Domain, Cluster and Item unpack the PMID's three parts.
func (p PMID) Domain() int  { return int(p>>22) & 0x1FF }
func (p PMID) Cluster() int { return int(p>>10) & 0xFFF }
func (p PMID) Item() int    { return int(p) & 0x3FF }

// String formats the PMID the way PCP tools print it: "127.2.0".
func (p PMID) String() string {
	if p == PMIDNull {
		return "PM_ID_NULL"
	}
	return strconv.Itoa(p.Domain()) + "." + strconv.Itoa(p.Cluster()) + "." + strconv.Itoa(p.Item())
}

// InDom identifies an instance domain: 9 bits of domain, 22 of serial.
type InDom uint32

// InDomNull is PM_INDOM_NULL, the "indom" of singular metrics.
const InDomNull InDom = 0xFFFFFFFF

// InNull is PM_IN_NULL, the instance id of a singular metric's one value.
const InNull int32 = -1

// NewInDom packs an InDom; out-of-range parts are truncated.
func NewInDom(domain, serial int) InDom {
	return InDom(uint32(domain&0x1FF)<<22 | uint32(serial&0x3FFFFF))
}

// Domain and Serial unpack the InDom's two parts.
func (i InDom) Domain() int { return int(i>>22) & 0x1FF }
func (i InDom) Serial() int { return int(i) & 0x3FFFFF }

// String formats the InDom as PCP does: "127.1".
func (i InDom) String() string {
	if i == InDomNull {
		return "PM_INDOM_NULL"
	}
	return strconv.Itoa(i.Domain()) + "." + strconv.Itoa(i.Serial())
}

// Units is the packed pmUnits word. The low byte stays zero: it is padding
// before PCP 7.2 and peers older than that reject anything else.
type Units uint32

// Scales for NewUnits (PM_SPACE_*, PM_TIME_*; counts are powers of ten).
const (
	SpaceByte  = 0
	SpaceKByte = 1
	SpaceMByte = 2
	SpaceGByte = 3
	TimeNSec   = 0
	TimeUSec   = 1
	TimeMSec   = 2
	TimeSec    = 3
	CountOne   = 0
)

// NewUnits packs dimensions (signed, -8..7) and scales into a pmUnits word.
// It is small enough to inline, so that the compiler folds the units of
// package variables (UnitsCount, ...) into data.
func NewUnits(dimSpace, dimTime, dimCount, scaleSpace, scaleTime, scaleCount int) Units {
	return Units(nibble(dimSpace)<<28 | nibble(dimTime)<<24 | nibble(dimCount)<<20 |
		nibble(scaleSpace)<<16 | nibble(scaleTime)<<12 | nibble(scaleCount)<<8)
}

func nibble(v int) uint32 { return uint32(v) & 0xF }

// Common units.
var (
	UnitsNone  = Units(0)
	UnitsCount = NewUnits(0, 0, 1, 0, 0, CountOne)
)

func sext4(v uint32) int { return int(int8(v<<4) >> 4) }

// The accessors below unpack a Units word; dimensions and the count scale
// are signed.
func (u Units) DimSpace() int   { return sext4(uint32(u) >> 28) }
func (u Units) DimTime() int    { return sext4(uint32(u) >> 24 & 0xF) }
func (u Units) DimCount() int   { return sext4(uint32(u) >> 20 & 0xF) }
func (u Units) ScaleSpace() int { return int(u>>16) & 0xF }
func (u Units) ScaleTime() int  { return int(u>>12) & 0xF }
func (u Units) ScaleCount() int { return sext4(uint32(u) >> 8 & 0xF) }

// ValueType is a metric's data type (PM_TYPE_*).
type ValueType int32

const (
	ValueNoSupport ValueType = -1
	ValueInt32     ValueType = 0
	ValueUint32    ValueType = 1
	ValueInt64     ValueType = 2
	ValueUint64    ValueType = 3
	ValueFloat     ValueType = 4
	ValueDouble    ValueType = 5
	ValueString    ValueType = 6
	ValueAggregate ValueType = 7
)

var valueTypeNames = [...]string{"32", "U32", "64", "U64", "FLOAT", "DOUBLE", "STRING", "AGGREGATE"}

// String returns PCP's short name for the type, e.g. "U64".
func (t ValueType) String() string {
	if t >= 0 && int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	if t == ValueNoSupport {
		return "NOSUPPORT"
	}
	return "TYPE(" + strconv.Itoa(int(t)) + ")"
}

// Sem is a metric's semantics (PM_SEM_*).
type Sem int32

const (
	SemCounter  Sem = 1
	SemInstant  Sem = 3
	SemDiscrete Sem = 4
)

// Desc is a metric descriptor (pmDesc), 20 bytes on the wire.
type Desc struct {
	PMID  PMID
	Type  ValueType
	InDom InDom
	Sem   Sem
	Units Units
}

// Value formats in a RESULT value set (PM_VAL_*).
const (
	ValInsitu = 0
	ValDPtr   = 1
	ValSPtr   = 2
)

// Text request bits (PM_TEXT_*).
const (
	TextOneLine = 1
	TextHelp    = 2
	TextPMID    = 4
	TextInDom   = 8
)

// Label types and flags (PM_LABEL_*).
const (
	LabelContext   = 0x01
	LabelDomain    = 0x02
	LabelInDom     = 0x04
	LabelCluster   = 0x08
	LabelItem      = 0x10
	LabelInstances = 0x20
	LabelCompound  = 0x40
	LabelOptional  = 0x80
)

// Profile states (PM_PROFILE_*).
const (
	ProfileInclude = 0
	ProfileExclude = 1
)

// PMNS name status words.
const (
	PMNSLeaf    = 0
	PMNSNonLeaf = 1
)

// State-change flags an agent may put in a RESULT's tv_sec word.
const (
	StateLabelChange = 0x08
	StateNamesChange = 0x10
)

// Credentials (PDU_CREDS).
const (
	CredVersion   = 1 // CVERSION, the only credential type agents send
	PDUVersion    = 2 // PDU_VERSION
	FlagAuth      = 0x0004
	FlagContainer = 0x0040
)

// Client attribute keys an agent may see in PDU_ATTR (PCP_ATTR_*).
const (
	AttrUsername  = 5
	AttrUserID    = 11
	AttrGroupID   = 12
	AttrProcessID = 14
	AttrContainer = 15
)

// Cred is one credential word: type, version, flags.
type Cred struct {
	Type    uint8
	Version uint8
	Flags   uint16
}

// VersionCred is the credential every agent sends: CVERSION, PDU_VERSION 2.
func VersionCred(flags uint16) Cred {
	return Cred{Type: CredVersion, Version: PDUVersion, Flags: flags}
}

func (c Cred) word() uint32 { return uint32(c.Type)<<24 | uint32(c.Version)<<16 | uint32(c.Flags) }

func credFromWord(w uint32) Cred {
	return Cred{Type: uint8(w >> 24), Version: uint8(w >> 16), Flags: uint16(w)}
}

func pad4(n int) int { return (n + 3) &^ 3 }
