// The JSON forms of SAs and policies that requests carry and answers
// return, with the config file's field names, and their conversions to
// and from package sa's types.

package control

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ipsecd/ipsecd/internal/keytext"
	"github.com/ipsecd/ipsecd/sa"
)

// StateIDSpec is StateID in JSON; an empty dir is either direction.
type StateIDSpec struct {
	Dir string     `json:"dir,omitempty"`
	SPI string     `json:"spi"`
	Dst netip.Addr `json:"dst"`
}

// StateSpec is sa.Config in JSON, with the config file's field names.
type StateSpec struct {
	Src   netip.Addr     `json:"src"`
	Dst   netip.Addr     `json:"dst"`
	SPI   string         `json:"spi"`
	Dir   string         `json:"dir"`
	Mode  string         `json:"mode"`
	IfID  uint32         `json:"if_id"`
	AEAD  *AlgorithmSpec `json:"aead,omitempty"`
	Enc   *AlgorithmSpec `json:"enc,omitempty"`
	Auth  *AlgorithmSpec `json:"auth,omitempty"`
	Encap *EncapSpec     `json:"encap,omitempty"`
	// ReplayWindow absent is sa.DefaultReplayWindowFor the direction,
	// as in the config file; 0 turns anti-replay off.
	ReplayWindow *uint32       `json:"replay_window,omitempty"`
	ESN          bool          `json:"esn"`
	Lifetime     *LifetimeSpec `json:"lifetime,omitempty"`
	Selector     *SelectorSpec `json:"selector,omitempty"`
}

// AlgorithmSpec is sa.Algorithm in JSON; Key is 0x-hex, or empty.
type AlgorithmSpec struct {
	Name      string `json:"name"`
	Key       string `json:"key,omitempty"`
	ICVBits   int    `json:"icv_bits,omitempty"`
	TruncBits int    `json:"trunc_bits,omitempty"`
}

// EncapSpec is sa.Encap in JSON.
type EncapSpec struct {
	Type  string `json:"type"`
	SPort uint16 `json:"sport"`
	DPort uint16 `json:"dport"`
}

// LifetimeSpec is sa.Lifetime in JSON.
type LifetimeSpec struct {
	SoftBytes      uint64 `json:"soft_bytes,omitempty"`
	HardBytes      uint64 `json:"hard_bytes,omitempty"`
	SoftPackets    uint64 `json:"soft_packets,omitempty"`
	HardPackets    uint64 `json:"hard_packets,omitempty"`
	SoftAddSeconds uint64 `json:"soft_add_seconds,omitempty"`
	HardAddSeconds uint64 `json:"hard_add_seconds,omitempty"`
}

// SelectorSpec is sa.Selector in JSON; an absent prefix matches all.
// SrcTS and DstTS, instead of the prefixes, are traffic selector lists
// (sa.TSSet: the selectors IKE negotiated, when they are not one prefix
// each side).
type SelectorSpec struct {
	Src   *netip.Prefix `json:"src,omitempty"`
	Dst   *netip.Prefix `json:"dst,omitempty"`
	SrcTS []TSSpec      `json:"src_ts,omitempty"`
	DstTS []TSSpec      `json:"dst_ts,omitempty"`
}

// TSSpec is sa.TS in JSON: an address range, a protocol (0 or absent:
// any) and a port range (0-65535: any).
type TSSpec struct {
	Start     netip.Addr `json:"start"`
	End       netip.Addr `json:"end"`
	Proto     uint8      `json:"proto,omitempty"`
	StartPort uint16     `json:"start_port"`
	EndPort   uint16     `json:"end_port"`
}

func tsSpecs(l []sa.TS) []TSSpec {
	out := make([]TSSpec, len(l))
	for i, t := range l {
		out[i] = TSSpec(t)
	}
	return out
}

func tsOfSpecs(l []TSSpec) []sa.TS {
	out := make([]sa.TS, len(l))
	for i, t := range l {
		out[i] = sa.TS(t)
	}
	return out
}

// PolicySpec is sa.Policy in JSON.
type PolicySpec struct {
	Dir    string        `json:"dir"`
	IfID   uint32        `json:"if_id"`
	Src    *netip.Prefix `json:"src,omitempty"`
	Dst    *netip.Prefix `json:"dst,omitempty"`
	Action string        `json:"action,omitempty"`
}

// FormatSPI writes an SPI the one way ipsecd writes it everywhere (CLI,
// JSON, logs and the metrics' spi label): hex without leading zeros, 0x1001.
func FormatSPI(spi uint32) string { return fmt.Sprintf("%#x", spi) }

// ParseSPI reads an SPI in hex (0x...) or decimal.
func ParseSPI(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("spi %q: want 0x100..0xffffffff", s)
	}
	return uint32(v), nil
}

// NewStateIDSpec converts id for the wire.
func NewStateIDSpec(id StateID) *StateIDSpec {
	s := &StateIDSpec{SPI: FormatSPI(id.SPI), Dst: id.Dst}
	if id.Dir != 0 {
		s.Dir = id.Dir.String()
	}
	return s
}

// StateID converts s back.
func (s *StateIDSpec) StateID() (StateID, error) {
	var id StateID
	var ok bool
	if id.Dir, ok = sa.ParseDir(s.Dir); !ok && s.Dir != "" {
		return id, fmt.Errorf("dir %q: want in or out", s.Dir)
	}
	spi, err := ParseSPI(s.SPI)
	if err != nil {
		return id, err
	}
	id.SPI = spi
	if !s.Dst.IsValid() {
		return id, errors.New("dst: missing")
	}
	id.Dst = s.Dst.Unmap()
	return id, nil
}

// NewStateSpec converts c for the wire, with its keys only if keys is true.
func NewStateSpec(c sa.Config, keys bool) StateSpec {
	s := StateSpec{
		Src: c.Src, Dst: c.Dst, SPI: FormatSPI(c.SPI), Dir: c.Dir.String(), Mode: c.Mode.String(),
		IfID: c.IfID, ReplayWindow: &c.ReplayWindow, ESN: c.ESN,
	}
	alg := func(a *sa.Algorithm, kind sa.AlgorithmKind) *AlgorithmSpec {
		if a == nil {
			return nil
		}
		as := &AlgorithmSpec{Name: a.Name}
		if keys && len(a.Key) > 0 {
			as.Key = "0x" + hex.EncodeToString(a.Key)
		}
		switch kind {
		case sa.KindAEAD:
			as.ICVBits = a.Bits
		case sa.KindAuth:
			as.TruncBits = a.Bits
		}
		return as
	}
	s.AEAD = alg(c.AEAD, sa.KindAEAD)
	s.Enc = alg(c.Enc, sa.KindEnc)
	s.Auth = alg(c.Auth, sa.KindAuth)
	if c.Encap != nil {
		s.Encap = &EncapSpec{Type: "espinudp", SPort: c.Encap.SrcPort, DPort: c.Encap.DstPort}
	}
	if lt := c.Lifetime; lt != (sa.Lifetime{}) {
		ls := LifetimeSpec(lt.Seconds())
		s.Lifetime = &ls
	}
	if sel := c.Selector; !sel.MatchesAll() {
		s.Selector = &SelectorSpec{Src: prefixPtr(sel.Src), Dst: prefixPtr(sel.Dst)}
		if sel.TS != nil {
			s.Selector.SrcTS, s.Selector.DstTS = tsSpecs(sel.TS.Src), tsSpecs(sel.TS.Dst)
		}
	}
	return s
}

func prefixPtr(p netip.Prefix) *netip.Prefix {
	if !p.IsValid() {
		return nil
	}
	return &p
}

func prefixOf(p *netip.Prefix) netip.Prefix {
	if p == nil {
		return netip.Prefix{}
	}
	return *p
}

// Config converts s to an sa.Config, with sa's defaults filled in. It
// checks the syntax of each field; sa.Check checks the result.
func (s *StateSpec) Config() (sa.Config, error) {
	c := sa.Config{Src: s.Src.Unmap(), Dst: s.Dst.Unmap(), IfID: s.IfID, ESN: s.ESN}
	var errs []string
	if s.SPI != "" {
		spi, err := ParseSPI(s.SPI)
		if err != nil {
			errs = append(errs, err.Error())
		}
		c.SPI = spi
	}
	var ok bool
	if c.Dir, ok = sa.ParseDir(s.Dir); !ok && s.Dir != "" {
		errs = append(errs, fmt.Sprintf("dir %q: want in or out", s.Dir))
	}
	c.ReplayWindow = sa.DefaultReplayWindowFor(c.Dir)
	if s.ReplayWindow != nil {
		c.ReplayWindow = *s.ReplayWindow
	}
	if c.Mode, ok = sa.ParseMode(s.Mode); !ok && s.Mode != "" {
		errs = append(errs, fmt.Sprintf("mode %q: want tunnel or transport", s.Mode))
	}
	alg := func(a *AlgorithmSpec, kind sa.AlgorithmKind) *sa.Algorithm {
		if a == nil {
			return nil
		}
		out := &sa.Algorithm{Name: a.Name, Bits: a.ICVBits}
		if kind == sa.KindAuth {
			out.Bits = a.TruncBits
		}
		if a.Key != "" {
			k, err := keytext.ParseHex(a.Key)
			if err != nil {
				errs = append(errs, string(kind)+".key: "+err.Error())
			}
			out.Key = k
		}
		return out
	}
	c.AEAD = alg(s.AEAD, sa.KindAEAD)
	c.Enc = alg(s.Enc, sa.KindEnc)
	c.Auth = alg(s.Auth, sa.KindAuth)
	if e := s.Encap; e != nil {
		if e.Type != "espinudp" {
			errs = append(errs, fmt.Sprintf("encap.type %q: want espinudp", e.Type))
		}
		c.Encap = &sa.Encap{SrcPort: e.SPort, DstPort: e.DPort}
	}
	if lt := s.Lifetime; lt != nil {
		l, err := sa.LifetimeSeconds(*lt).Lifetime()
		if err != nil {
			errs = append(errs, err.Error())
		}
		c.Lifetime = l
	}
	if sel := s.Selector; sel != nil {
		c.Selector = sa.Selector{Src: prefixOf(sel.Src), Dst: prefixOf(sel.Dst)}
		if len(sel.SrcTS) != 0 || len(sel.DstTS) != 0 {
			ts, err := sa.NewSelector(tsOfSpecs(sel.SrcTS), tsOfSpecs(sel.DstTS))
			if err != nil {
				errs = append(errs, "selector."+strings.ReplaceAll(err.Error(), "\n", "; selector."))
			}
			// Prefixes beside the lists stay for sa.Check to refuse.
			c.Selector.TS = ts.TS
			if ts.TS == nil {
				c.Selector.Src, c.Selector.Dst = ts.Src, ts.Dst
			}
		}
	}
	c.FillDefaults()
	if errs != nil {
		return c, errors.New(strings.Join(errs, "; "))
	}
	return c, nil
}

// NewPolicySpec converts p for the wire.
func NewPolicySpec(p sa.Policy) PolicySpec {
	return PolicySpec{Dir: p.Dir.String(), IfID: p.IfID, Src: prefixPtr(p.Selector.Src),
		Dst: prefixPtr(p.Selector.Dst), Action: p.Action.String()}
}

// Policy converts s back; an empty action is allow.
func (s *PolicySpec) Policy() (sa.Policy, error) {
	p := sa.Policy{IfID: s.IfID, Selector: sa.Selector{Src: prefixOf(s.Src), Dst: prefixOf(s.Dst)}, Action: sa.ActionAllow}
	var ok bool
	if p.Dir, ok = sa.ParseDir(s.Dir); !ok {
		return p, fmt.Errorf("dir %q: want in or out", s.Dir)
	}
	if s.Action != "" {
		if p.Action, ok = sa.ParseAction(s.Action); !ok {
			return p, fmt.Errorf("action %q: want allow or block", s.Action)
		}
	}
	return p, nil
}

type stateInfoJSON struct {
	StateSpec
	Stats StateStats `json:"stats"`
}

// MarshalJSON writes the state with the config file's field names, and
// its keys if Config has them.
func (si StateInfo) MarshalJSON() ([]byte, error) {
	return json.Marshal(stateInfoJSON{NewStateSpec(si.Config, true), si.Stats})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (si *StateInfo) UnmarshalJSON(data []byte) error {
	var j stateInfoJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	c, err := j.StateSpec.Config()
	if err != nil {
		return err
	}
	si.Config, si.Stats = c, j.Stats
	return nil
}
