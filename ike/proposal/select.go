package proposal

import (
	"errors"
	"fmt"
	"slices"
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
	// AddKE are the additional key exchanges 1 to 7 (RFC 9370): a zero
	// Alg where the type is absent, a keN_none where NONE was chosen.
	AddKE [MaxAddKE]Alg
}

// ErrNoProposalChosen means no proposal of the peer matched one of ours.
// A responder answers NO_PROPOSAL_CHOSEN; an initiator gives up.
var ErrNoProposalChosen = errors.New("proposal: no proposal chosen")

// ErrBadChoice means a responder's answer is not one proposal with one
// transform of each type out of those we offered (RFC 7296 §2.7): the
// initiator fails the exchange.
var ErrBadChoice = errors.New("proposal: the responder chose something we did not offer")

var types = []message.TransformType{message.TransENCR, message.TransPRF, message.TransINTEG, message.TransDH, message.TransESN,
	6, 7, 8, 9, 10, 11, 12} // the ADDKEs, in order

// addKEMode says what a negotiation does with RFC 9370's additional key
// exchanges.
type addKEMode uint8

const (
	// addKENone: the exchange runs no additional key exchange (IKE_SA_INIT
	// with a peer that announced no IKE_INTERMEDIATE): only NONE, or the
	// type's absence, matches.
	addKENone addKEMode = iota
	// addKEIgnore: key exchanges play no part at all (a child in
	// IKE_AUTH, whose keys come from the IKE SA).
	addKEIgnore
	// addKERun: additional exchanges are negotiated (IKE_SA_INIT, which
	// IKE_INTERMEDIATE follows; CREATE_CHILD_SA, which IKE_FOLLOWUP_KE
	// follows).
	addKERun
)

// Select chooses, as a responder, from the peer's proposals theirs, the
// first of ours (in our order of preference) that one of theirs matches,
// and in it each type's first transform in the peer's order that we also
// offer. Transforms we do not implement are ignored, and so are, in an
// ESP proposal, those package sa does not run (Alg.ESP): what is chosen
// can be installed. With ignoreDH, key exchange transforms play no part
// (a child SA in IKE_AUTH). Additional key exchanges (RFC 9370) are not
// run where Select serves: a proposal matches only where they can be
// NONE (SelectMultiKE negotiates them).
func Select(ours []Proposal, theirs []message.Proposal, ignoreDH bool) (Suite, error) {
	return selectMode(ours, theirs, ignoreDH, withoutAddKE(ignoreDH))
}

// withoutAddKE is the mode of an exchange that runs no additional key
// exchange: with ignoreDH none plays a part, else only NONE matches.
func withoutAddKE(ignoreDH bool) addKEMode {
	if ignoreDH {
		return addKEIgnore
	}
	return addKENone
}

// SelectMultiKE is Select for IKE_SA_INIT and CREATE_CHILD_SA, where RFC
// 9370's additional key exchanges are negotiated like any other type
// (and run in IKE_INTERMEDIATE or IKE_FOLLOWUP_KE), NONE (keN_none) as
// one of their transforms, and a type one side leaves out matching the
// other's NONE (§2.2.1).
func SelectMultiKE(ours []Proposal, theirs []message.Proposal) (Suite, error) {
	return selectMode(ours, theirs, false, addKERun)
}

func selectMode(ours []Proposal, theirs []message.Proposal, ignoreDH bool, mode addKEMode) (Suite, error) {
	for _, o := range ours {
		for _, t := range theirs {
			if t.Protocol != o.Protocol {
				continue
			}
			if s, ok := match(o, t, ignoreDH, mode); ok {
				return s, nil
			}
		}
	}
	return Suite{}, ErrNoProposalChosen
}

func match(o Proposal, t message.Proposal, ignoreDH bool, mode addKEMode) (Suite, bool) {
	s := Suite{Num: t.Num, Protocol: t.Protocol, SPI: t.SPI}
	for _, typ := range types {
		if typ == message.TransDH && ignoreDH || typ.IsAddKE() && mode == addKEIgnore {
			continue
		}
		if typ.IsAddKE() {
			a, ok := matchAddKE(o, t, typ, mode)
			if !ok {
				return Suite{}, false
			}
			s.set(a)
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
// ESP, an ENCR or INTEG transform must be one an SA runs; in IKE, it must
// not be one that is for ESP only (IsESPOnly).
func runs(proto message.ProtocolID, a Alg) bool {
	if proto == message.ProtoIKE {
		return !a.IsESPOnly()
	}
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
	default:
		if n := AddKENumber(a.Type); n > 0 {
			s.AddKE[n-1] = a
		}
	}
}

// matchAddKE chooses additional exchange typ: the peer's first method
// that we offer too, NONE included (in addKENone mode NONE only). A type
// neither side names is absent (a zero Alg); one side's NONE matches the
// other's silence, and then the type is absent from the answer as well
// when the peer did not name it.
func matchAddKE(o Proposal, t message.Proposal, typ message.TransformType, mode addKEMode) (Alg, bool) {
	var mine []Alg
	for _, a := range o.Algs {
		if a.Type == typ {
			mine = append(mine, a)
		}
	}
	offered := false
	for _, tr := range t.Transforms {
		if tr.Type != typ {
			continue
		}
		offered = true
		a, ok := ByTransform(tr)
		if !ok || mode == addKENone && !a.IsNone() {
			continue
		}
		if len(mine) == 0 && a.IsNone() || slices.Contains(mine, a) {
			return a, true
		}
	}
	if !offered {
		// The peer's silence is NONE: we match if we can do without.
		none, _ := addKEOf(typ, dh.None)
		return Alg{}, len(mine) == 0 || slices.Contains(mine, none)
	}
	return Alg{}, false
}

// CheckChoice validates a responder's SA payload against what we offered
// and returns the suite it names: exactly one proposal, with at most one
// transform of each type, all from one of ours.
func CheckChoice(ours []Proposal, answer []message.Proposal, ignoreDH bool) (Suite, error) {
	return checkChoice(ours, answer, ignoreDH, withoutAddKE(ignoreDH))
}

// CheckChoiceMultiKE is CheckChoice for an answer to IKE_SA_INIT or
// CREATE_CHILD_SA, where additional key exchanges are negotiated
// (SelectMultiKE).
func CheckChoiceMultiKE(ours []Proposal, answer []message.Proposal) (Suite, error) {
	return checkChoice(ours, answer, false, addKERun)
}

func checkChoice(ours []Proposal, answer []message.Proposal, ignoreDH bool, mode addKEMode) (Suite, error) {
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
	s, err := selectMode(ours, answer, ignoreDH, mode)
	if err != nil {
		return Suite{}, ErrBadChoice
	}
	return s, nil
}

// Proposal returns the suite as the one proposal a responder sends back.
func (s Suite) Proposal() message.Proposal {
	p := message.Proposal{Num: s.Num, Protocol: s.Protocol, SPI: s.SPI}
	for _, a := range s.algs() {
		p.Transforms = append(p.Transforms, a.Transform())
	}
	return p
}

// String names the suite as strongSwan's logs do: "AES_CBC-256/..." is
// theirs; ours is the proposal syntax, "aes256-sha256-prfsha256-x25519".
func (s Suite) String() string {
	var names []string
	for _, a := range s.algs() {
		names = append(names, a.Name)
	}
	return strings.Join(names, "-")
}

// algs returns the suite's algorithms in the order a proposal lists
// them.
func (s Suite) algs() []Alg {
	var out []Alg
	for _, a := range append([]Alg{s.Encr, s.Integ, s.PRF, s.DH}, append(s.AddKE[:], s.ESN)...) {
		if a.Name != "" {
			out = append(out, a)
		}
	}
	return out
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
