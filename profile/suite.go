package profile

import (
	"fmt"
	"strings"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// suite is one algorithm of each kind, as a client that offers a single
// combination is configured. integ is empty with an AEAD; prf is set in
// IKE suites only; dh is empty in an ESP suite without PFS.
type suite struct {
	encr, integ, prf, dh proposal.Alg
}

// aead reports whether the suite's cipher also authenticates.
func (s suite) aead() bool { return s.encr.IsAEAD() }

// names maps the algorithms a client can express to its names for them.
type names map[string]string

// newSingleSuite reads o's connection from c (newGateway) for a client
// that offers a single suite (Apple, Windows: kind names it in errors,
// client in what pick says), and picks its IKE suite from the
// connection's proposals (ike, the client's names) and its ESP suite from
// the first child's (esp).
func newSingleSuite(c *config.IKEConfig, o Options, kind, client string, ike, esp names) (*gateway, suite, suite, error) {
	g, err := newGateway(c, o)
	if err != nil {
		return nil, suite{}, suite{}, err
	}
	ikeSuite, err := pick(g.conn.Proposals, "proposals", client, ike)
	if err == nil {
		var espSuite suite
		espSuite, err = pick(g.child.ESPProposals, "children["+g.child.Name+"].esp_proposals", client, esp)
		if err == nil {
			return g, ikeSuite, espSuite, nil
		}
	}
	return nil, suite{}, suite{}, fmt.Errorf("%s: connection %s: %w", kind, g.conn.Name, err)
}

// pick returns the first suite of ps, in order, that client (its names
// ok) can express: in the first proposal with an algorithm of each kind
// that the client knows, the first of each kind. An IKE suite of a
// client whose integrity algorithm also sets the PRF (samePRF: Apple and
// Windows, RFC 7296's integrity and PRF of one hash) takes the PRF of the
// integrity's hash, and with an AEAD the PRF stands for the integrity. A
// proposal with a required additional key exchange (RFC 9370) is one the
// clients cannot make. field names the list in an error ("proposals"),
// client the client ("Windows").
func pick(ps []proposal.Proposal, field, client string, ok names) (suite, error) {
	var why []string
	for i, p := range ps {
		s, missing := pickOne(p, ok)
		if missing == "" {
			return s, nil
		}
		why = append(why, fmt.Sprintf("%s[%d] %s: %s", field, i, p, missing))
	}
	return suite{}, fmt.Errorf("%s cannot express any of %s: %s", client, field, strings.Join(why, "; "))
}

// pickOne is pick for one proposal; missing says what the client lacks,
// "" when nothing.
func pickOne(p proposal.Proposal, ok names) (s suite, missing string) {
	var encr, integ, prf, dh []proposal.Alg
	var lacking []string
	esn, noESN := false, false
	for _, a := range p.Algs {
		_, known := ok[a.Name]
		switch {
		case a.Type.IsAddKE():
			if !a.IsNone() {
				return s, a.Name + " (an additional key exchange)"
			}
		case a.Type == message.TransESN:
			esn = true
			noESN = noESN || a.Name == proposal.ESNOff.Name
		case !known:
			lacking = append(lacking, a.Name)
		case a.Type == message.TransENCR:
			encr = append(encr, a)
		case a.Type == message.TransINTEG:
			integ = append(integ, a)
		case a.Type == message.TransPRF:
			prf = append(prf, a)
		case a.Type == message.TransDH:
			dh = append(dh, a)
		}
	}
	if esn && !noESN {
		return s, "extended sequence numbers only (the client offers noesn)"
	}
	if len(encr) == 0 {
		return s, "no cipher it knows (it lacks " + strings.Join(lacking, ", ") + ")"
	}
	s.encr = encr[0]
	ike := p.Protocol == message.ProtoIKE
	switch {
	case s.aead() && ike:
		if len(prf) == 0 {
			return s, "no PRF it knows (it lacks " + strings.Join(lacking, ", ") + ")"
		}
		s.prf = prf[0]
	case !s.aead():
		s.integ, s.prf = firstWithPRF(integ, prf, ike)
		if s.integ.Name == "" {
			return s, "no integrity algorithm it knows with the PRF of its hash (it lacks " + strings.Join(lacking, ", ") + ")"
		}
	}
	if len(dh) > 0 {
		s.dh = dh[0]
	} else if ike || p.HasDH() {
		return s, "no group it knows (it lacks " + strings.Join(lacking, ", ") + ")"
	}
	return s, ""
}

// firstWithPRF returns the first integrity algorithm whose hash's PRF is
// in prf too (IKE), or the first (ESP).
func firstWithPRF(integ, prf []proposal.Alg, ike bool) (proposal.Alg, proposal.Alg) {
	for _, i := range integ {
		if !ike {
			return i, proposal.Alg{}
		}
		for _, p := range prf {
			if "prf"+i.Name == p.Name {
				return i, p
			}
		}
	}
	return proposal.Alg{}, proposal.Alg{}
}
