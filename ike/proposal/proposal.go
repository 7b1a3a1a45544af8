package proposal

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/message"
)

// Proposal is one proposal as configured: a protocol and its transforms,
// each type in order of preference.
type Proposal struct {
	Protocol message.ProtocolID
	Algs     []Alg
}

// Parse parses a strongSwan proposal string for IKE (proto ProtoIKE) or
// ESP. An ESP proposal may only name algorithms that package sa runs
// (Alg.ESP). As strongSwan does, an IKE proposal with integrity algorithms but
// no PRF gets the PRFs of the same hashes, and an ESP proposal without
// esn/noesn gets noesn.
func Parse(proto message.ProtocolID, s string) (Proposal, error) {
	p := Proposal{Protocol: proto}
	if s == "" {
		return p, errors.New("proposal: empty")
	}
	count := map[message.TransformType]int{}
	aead, plain := false, false
	for _, name := range strings.Split(s, "-") {
		a, ok := Lookup(name)
		if !ok && strings.HasSuffix(name, "mlkem512") {
			return p, fmt.Errorf("proposal %q: %q: ML-KEM-512 is not implemented (Go's crypto/mlkem has ML-KEM-768 and ML-KEM-1024): use mlkem768 or mlkem1024", s, name)
		}
		if !ok {
			return p, fmt.Errorf("proposal %q: unknown algorithm %q", s, name)
		}
		if proto == message.ProtoIKE && a.IsESPOnly() {
			return p, fmt.Errorf("proposal %q: %q is for ESP proposals only: IKE's own SA takes sha256, sha384 or sha512 for integrity", s, name)
		}
		if !runs(proto, a) {
			return p, fmt.Errorf("proposal %q: %q is for IKE proposals only; ESP runs %s", s, name, espNames())
		}
		if a.Type == message.TransENCR {
			if a.IsAEAD() {
				aead = true
			} else {
				plain = true
			}
		}
		p.Algs = append(p.Algs, a)
		count[a.Type]++
	}
	switch {
	case count[message.TransENCR] == 0:
		return p, fmt.Errorf("proposal %q: no encryption algorithm", s)
	case aead && plain:
		return p, fmt.Errorf("proposal %q: mixes AEAD and non-AEAD encryption", s)
	case aead && count[message.TransINTEG] > 0:
		return p, fmt.Errorf("proposal %q: an AEAD takes no integrity algorithm", s)
	case plain && count[message.TransINTEG] == 0:
		return p, fmt.Errorf("proposal %q: no integrity algorithm", s)
	}
	if proto == message.ProtoIKE {
		if count[message.TransPRF] == 0 {
			if aead {
				return p, fmt.Errorf("proposal %q: an AEAD IKE proposal needs a prf (prfsha256, ...)", s)
			}
			for _, a := range p.Algs {
				if a.Type == message.TransINTEG {
					p.Algs = append(p.Algs, integToPRF[a.ID])
				}
			}
		}
		if count[message.TransDH] == 0 {
			return p, fmt.Errorf("proposal %q: no key exchange group", s)
		}
		if count[message.TransESN] > 0 {
			return p, fmt.Errorf("proposal %q: esn/noesn is for ESP proposals", s)
		}
		return p, nil
	}
	if count[message.TransPRF] > 0 {
		return p, fmt.Errorf("proposal %q: a prf is for IKE proposals", s)
	}
	if p.HasAddKE() && count[message.TransDH] == 0 {
		return p, fmt.Errorf("proposal %q: additional key exchanges (keN_) come after a key exchange group for PFS (aes256gcm16-x25519-ke1_mlkem768)", s)
	}
	if count[message.TransESN] == 0 {
		p.Algs = append(p.Algs, ESNOff)
	}
	return p, nil
}

// ParseList parses several proposal strings.
func ParseList(proto message.ProtocolID, ss []string) ([]Proposal, error) {
	var ps []Proposal
	for _, s := range ss {
		p, err := Parse(proto, s)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// String writes p as strongSwan would: its algorithm names joined by "-".
func (p Proposal) String() string {
	names := make([]string, len(p.Algs))
	for i, a := range p.Algs {
		names[i] = a.Name
	}
	return strings.Join(names, "-")
}

// Legacy returns the names of p's legacy algorithms (see Alg.IsLegacy).
func (p Proposal) Legacy() []string {
	var names []string
	for _, a := range p.Algs {
		if a.IsLegacy() {
			names = append(names, a.Name)
		}
	}
	return names
}

// HasDH reports whether p names a key exchange group (for ESP: PFS).
func (p Proposal) HasDH() bool {
	for _, a := range p.Algs {
		if a.Type == message.TransDH && a.ID != dh.None {
			return true
		}
	}
	return false
}

// Groups returns p's key exchange groups in order.
func (p Proposal) Groups() []uint16 {
	var g []uint16
	for _, a := range p.Algs {
		if a.Type == message.TransDH && a.ID != dh.None {
			g = append(g, a.ID)
		}
	}
	return g
}

// WithoutDH returns p without key exchange transforms (additional ones
// included), as a child's proposal travels in IKE_AUTH (RFC 7296 §1.2,
// RFC 9370 §2.2.3: its keys come from the IKE SA's exchanges).
func (p Proposal) WithoutDH() Proposal {
	q := Proposal{Protocol: p.Protocol}
	for _, a := range p.Algs {
		if a.Type != message.TransDH && !a.Type.IsAddKE() {
			q.Algs = append(q.Algs, a)
		}
	}
	return q
}

// Message returns p as an SA payload's proposal numbered num with spi.
func (p Proposal) Message(num uint8, spi []byte) message.Proposal {
	m := message.Proposal{Num: num, Protocol: p.Protocol, SPI: spi}
	for _, a := range p.Algs {
		m.Transforms = append(m.Transforms, a.Transform())
	}
	return m
}

// Messages numbers ps from 1, each with spi, without additional key
// exchanges (RFC 9370), for an exchange that runs none (IKE_AUTH's
// child, whose keys come from the IKE SA). A proposal whose additional
// exchanges are all optional (keN_none) goes without them; one that
// requires one is left out.
func Messages(ps []Proposal, spi []byte) []message.Proposal {
	var out []message.Proposal
	for _, p := range ps {
		if p.requiresAddKE() {
			continue
		}
		out = append(out, p.withoutAddKE().Message(uint8(len(out)+1), spi))
	}
	return out
}

// MessagesMultiKE numbers ps from 1 as IKE_SA_INIT and CREATE_CHILD_SA
// offer them, with their additional key exchanges. A proposal whose additional exchanges
// are all optional (keN_none) is followed by a copy without them:
// strongSwan before 6.0, like any RFC 7296 peer, refuses a proposal
// with a transform type it does not know (§3.3.6) but takes the copy.
func MessagesMultiKE(ps []Proposal, spi []byte) []message.Proposal {
	var out []message.Proposal
	for _, p := range ps {
		out = append(out, p.Message(uint8(len(out)+1), spi))
		if p.HasAddKE() && !p.requiresAddKE() {
			out = append(out, p.withoutAddKE().Message(uint8(len(out)+1), spi))
		}
	}
	return out
}

// requiresAddKE reports whether p has an additional exchange type
// without NONE among its methods.
func (p Proposal) requiresAddKE() bool {
	var types, optional [MaxAddKE + 1]bool
	for _, a := range p.Algs {
		if n := AddKENumber(a.Type); n > 0 {
			types[n] = true
			optional[n] = optional[n] || a.IsNone()
		}
	}
	return types != optional
}

// withoutAddKE returns p without its additional key exchange transforms.
func (p Proposal) withoutAddKE() Proposal {
	q := Proposal{Protocol: p.Protocol}
	for _, a := range p.Algs {
		if !a.Type.IsAddKE() {
			q.Algs = append(q.Algs, a)
		}
	}
	return q
}
