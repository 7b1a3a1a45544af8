package proposal

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/message"
)

// Suite is the outcome of a negotiation: one algorithm of each type (a
// zero Alg, Name "", where the type is absent), with the number and SPI of
// the proposal it came from.
type Suite struct {
	Num                       uint8
	Protocol                  message.ProtocolID
	SPI                       []byte
	Encr, PRF, Integ, DH, ESN Alg
}

// ErrNoProposalChosen means no proposal of the peer matched one of ours.
// A responder answers NO_PROPOSAL_CHOSEN; an initiator gives up.
var ErrNoProposalChosen = errors.New("proposal: no proposal chosen")

// ErrBadChoice means a responder's answer is not one proposal with one
// transform of each type out of those we offered (RFC 7296 §2.7): the
// initiator fails the exchange.
var ErrBadChoice = errors.New("proposal: the responder chose something we did not offer")

var types = []message.TransformType{message.TransENCR, message.TransPRF, message.TransINTEG, message.TransDH, message.TransESN}

// Select chooses, as a responder, from the peer's proposals theirs, the
// first of ours (in our order of preference) that one of theirs matches,
// and in it each type's first transform in the peer's order that we also
// offer. Transforms we do not implement are ignored, and so are, in an
// ESP proposal, those package sa does not run (Alg.ESP): what is chosen
// can be installed. With ignoreDH, key exchange transforms play no part
// (a child SA in IKE_AUTH).
func Select(ours []Proposal, theirs []message.Proposal, ignoreDH bool) (Suite, error) {
	for _, o := range ours {
		for _, t := range theirs {
			if t.Protocol != o.Protocol {
				continue
			}
			if s, ok := match(o, t, ignoreDH); ok {
				return s, nil
			}
		}
	}
	return Suite{}, ErrNoProposalChosen
}

func match(o Proposal, t message.Proposal, ignoreDH bool) (Suite, bool) {
	s := Suite{Num: t.Num, Protocol: t.Protocol, SPI: t.SPI}
	for _, typ := range types {
		if typ == message.TransDH && ignoreDH {
			continue
		}
		var mine []Alg
		for _, a := range o.Algs {
			if a.Type == typ {
				mine = append(mine, a)
			}
		}
		offered := false
		var got Alg
		found := false
		for _, tr := range t.Transforms {
			if tr.Type != typ || typ == message.TransDH && tr.ID == dh.None {
				continue
			}
			offered = true
			a, ok := ByTransform(tr)
			if !ok || found || !runs(t.Protocol, a) {
				continue
			}
			for _, m := range mine {
				if m == a {
					got, found = a, true
					break
				}
			}
		}
		switch {
		case len(mine) == 0 && !offered:
			continue // neither side uses this type
		case !found:
			return Suite{}, false
		}
		s.set(got)
	}
	return s, true
}

// runs reports whether a, chosen for protocol proto, can run there: in
// ESP, an ENCR or INTEG transform must be one an SA runs.
func runs(proto message.ProtocolID, a Alg) bool {
	if proto != message.ProtoESP || a.Type != message.TransENCR && a.Type != message.TransINTEG {
		return true
	}
	_, _, ok := a.ESP()
	return ok
}

func (s *Suite) set(a Alg) {
	switch a.Type {
	case message.TransENCR:
		s.Encr = a
	case message.TransPRF:
		s.PRF = a
	case message.TransINTEG:
		s.Integ = a
	case message.TransDH:
		s.DH = a
	case message.TransESN:
		s.ESN = a
	}
}

// CheckChoice validates a responder's SA payload against what we offered
// and returns the suite it names: exactly one proposal, with at most one
// transform of each type, all from one of ours.
func CheckChoice(ours []Proposal, answer []message.Proposal, ignoreDH bool) (Suite, error) {
	if len(answer) != 1 {
		return Suite{}, ErrBadChoice
	}
	seen := map[message.TransformType]bool{}
	for _, tr := range answer[0].Transforms {
		if seen[tr.Type] {
			return Suite{}, ErrBadChoice
		}
		seen[tr.Type] = true
	}
	s, err := Select(ours, answer, ignoreDH)
	if err != nil {
		return Suite{}, ErrBadChoice
	}
	return s, nil
}

// Proposal returns the suite as the one proposal a responder sends back.
func (s Suite) Proposal() message.Proposal {
	p := message.Proposal{Num: s.Num, Protocol: s.Protocol, SPI: s.SPI}
	for _, a := range []Alg{s.Encr, s.Integ, s.PRF, s.DH, s.ESN} {
		if a.Name != "" {
			p.Transforms = append(p.Transforms, a.Transform())
		}
	}
	return p
}

// String names the suite as strongSwan's logs do: "AES_CBC-256/..." is
// theirs; ours is the proposal syntax, "aes256-sha256-prfsha256-x25519".
func (s Suite) String() string {
	var names []string
	for _, a := range []Alg{s.Encr, s.Integ, s.PRF, s.DH, s.ESN} {
		if a.Name != "" {
			names = append(names, a.Name)
		}
	}
	return strings.Join(names, "-")
}

// FormatList writes proposals for a log line.
func FormatList(ps []message.Proposal) string {
	var out []string
	for _, p := range ps {
		var names []string
		for _, t := range p.Transforms {
			if a, ok := ByTransform(t); ok {
				names = append(names, a.Name)
			} else {
				names = append(names, fmt.Sprintf("unknown(%d:%d)", t.Type, t.ID))
			}
		}
		out = append(out, strings.Join(names, "-"))
	}
	return strings.Join(out, ", ")
}
