package vici

import (
	"strconv"
	"strings"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// listSAs streams one list-sa event per IKE SA, selected by ike (a
// connection's name) and ike-id (a unique id), then answers an empty
// message, as charon does. noblock is accepted and changes nothing: ipsecd
// never holds an SA away from a listing.
func listSAs(r *request) *Message {
	s := r.conn.s
	start := time.Now()
	sas, err := s.backend.IKEList()
	if err != nil {
		// charon answers list-sas without SAs alike; the empty answer
		// is its whole answer.
		return NewMessage()
	}
	wantName := r.msg.String("ike")
	wantID, _ := strconv.ParseUint(r.msg.String("ike-id"), 10, 32)
	for _, sa := range sas {
		if wantName != "" && sa.Name != wantName {
			continue
		}
		m := s.ikeSA(sa, start, true)
		if wantID != 0 && m.String("uniqueid") != strconv.FormatUint(wantID, 10) {
			continue
		}
		if r.emit("list-sa", NewMessage().Set(sa.Name, m)) != nil {
			break // the client is gone: the answer will not reach it either
		}
	}
	if wantName == "" && wantID == 0 {
		s.ids.prune(start)
	}
	return NewMessage()
}

// ikeSA writes an IKE SA as charon's list-sa does, with its children
// (child-sas) when children is set; now is the listing's time.
func (s *Server) ikeSA(sa control.IKESAInfo, now time.Time, children bool) *Message {
	id := s.ids.ikeID(sa.SPIInitiator, sa.Remote.Addr().String(), now)
	m := NewMessage().
		Set("uniqueid", strconv.FormatUint(uint64(id), 10)).
		Set("version", "2").
		Set("state", sa.State).
		Set("local-host", sa.Local.Addr().String()).
		Set("local-port", strconv.Itoa(int(sa.Local.Port()))).
		Set("local-id", orAny(sa.LocalID)).
		Set("remote-host", sa.Remote.Addr().String()).
		Set("remote-port", strconv.Itoa(int(sa.Remote.Port()))).
		Set("remote-id", orAny(sa.RemoteID))
	if sa.RemoteEAPID != "" && sa.RemoteEAPID != sa.RemoteID {
		m.Set("remote-eap-id", sa.RemoteEAPID)
	}
	if sa.Initiator {
		m.Set("initiator", "yes")
	}
	m.Set("initiator-spi", sa.SPIInitiator).Set("responder-spi", sa.SPIResponder)
	if sa.NAT {
		// ipsecd knows that there is a NAT, not on which side.
		m.Set("nat-any", "yes")
	}
	setAlgorithms(m, sa.Algorithms, false)
	if !sa.Established.IsZero() && sa.State == "ESTABLISHED" {
		m.Set("established", strconv.FormatInt(max(int64(now.Sub(sa.Established)/time.Second), 0), 10))
		if sa.RekeyIn > 0 {
			m.Set("rekey-time", strconv.FormatInt(sa.RekeyIn, 10))
		}
		if sa.ExpiresIn > 0 {
			m.Set("life-time", strconv.FormatInt(sa.ExpiresIn, 10))
		}
	}
	if len(sa.RemoteVIPs) > 0 {
		m.Set("remote-vips", sa.RemoteVIPs)
	}
	if children {
		cs := NewMessage()
		for _, c := range sa.Children {
			cm := s.childSA(c, now)
			cs.Set(c.Name+"-"+cm.String("uniqueid"), cm)
		}
		m.Set("child-sas", cs)
	}
	return m
}

// childSA writes a child as charon's list-sa does. Its reqid is its
// if_id: what binds its SAs to their interface and policies in ipsecd,
// as the reqid does in the kernel.
func (s *Server) childSA(c control.IKEChildInfo, now time.Time) *Message {
	id := s.ids.childID(c.SPIIn, now)
	m := NewMessage().
		Set("name", c.Name).
		Set("uniqueid", strconv.FormatUint(uint64(id), 10)).
		Set("reqid", strconv.FormatUint(uint64(c.IfID), 10)).
		Set("state", c.State).
		Set("mode", c.Mode).
		Set("protocol", "ESP")
	if c.Encap {
		m.Set("encap", "yes")
	}
	m.Set("spi-in", spi8(c.SPIIn)).Set("spi-out", spi8(c.SPIOut))
	if c.IfID != 0 {
		m.Set("if-id-in", hex8(uint64(c.IfID))).Set("if-id-out", hex8(uint64(c.IfID)))
	}
	setAlgorithms(m, c.Algorithms, true)
	m.Set("bytes-in", strconv.FormatUint(c.BytesIn, 10)).
		Set("packets-in", strconv.FormatUint(c.PacketsIn, 10)).
		Set("bytes-out", strconv.FormatUint(c.BytesOut, 10)).
		Set("packets-out", strconv.FormatUint(c.PacketsOut, 10))
	if c.RekeyIn > 0 {
		m.Set("rekey-time", strconv.FormatInt(c.RekeyIn, 10))
	}
	if c.ExpiresIn > 0 {
		m.Set("life-time", strconv.FormatInt(c.ExpiresIn, 10))
	}
	if !c.Installed.IsZero() {
		m.Set("install-time", strconv.FormatInt(max(int64(now.Sub(c.Installed)/time.Second), 0), 10))
	}
	return m.Set("local-ts", nonNil(c.LocalTS)).Set("remote-ts", nonNil(c.RemoteTS))
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// orAny writes an identity not yet known as charon does.
func orAny(id string) string {
	if id == "" {
		return "%any"
	}
	return id
}

// spi8 writes an ESP SPI ("0x1001", as the control socket has it) as
// charon does: 8 hex digits.
func spi8(s string) string {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return s
	}
	return hex8(v)
}

func hex8(v uint64) string {
	h := strconv.FormatUint(v, 16)
	return strings.Repeat("0", max(8-len(h), 0)) + h
}

// setAlgorithms sets encr-alg, encr-keysize, integ-alg, prf-alg,
// dh-group and esn from a suite in proposal syntax
// ("aes256gcm16-prfsha256-x25519"), with charon's names for them. A name
// ipsecd's table does not have is left out; esn only in a child.
func setAlgorithms(m *Message, suite string, child bool) {
	if suite == "" {
		return
	}
	var encr, integ, prf, dh *proposal.Alg
	esn := false
	for _, name := range strings.Split(suite, "-") {
		a, ok := proposal.Lookup(name)
		if !ok {
			continue
		}
		switch a.Type {
		case message.TransENCR:
			encr = &a
		case message.TransINTEG:
			integ = &a
		case message.TransPRF:
			prf = &a
		case message.TransDH:
			dh = &a
		case message.TransESN:
			esn = a.ID == proposal.ESN
		}
	}
	if encr != nil {
		m.Set("encr-alg", charonName(encrNames, encr.ID))
		if encr.KeyLen != 0 {
			m.Set("encr-keysize", strconv.Itoa(int(encr.KeyLen)))
		}
	}
	if integ != nil {
		m.Set("integ-alg", charonName(integNames, integ.ID))
	}
	if prf != nil {
		m.Set("prf-alg", charonName(prfNames, prf.ID))
	}
	if dh != nil {
		m.Set("dh-group", charonName(dhNames, dh.ID))
	}
	if child && esn {
		m.Set("esn", "1")
	}
}

// charon's names of the transforms (libstrongswan's enum names), by IANA
// id.
var (
	encrNames  = map[uint16]string{12: "AES_CBC", 18: "AES_GCM_8", 19: "AES_GCM_12", 20: "AES_GCM_16", 28: "CHACHA20_POLY1305"}
	integNames = map[uint16]string{2: "HMAC_SHA1_96", 12: "HMAC_SHA2_256_128", 13: "HMAC_SHA2_384_192",
		14: "HMAC_SHA2_512_256"}
	prfNames = map[uint16]string{2: "PRF_HMAC_SHA1", 5: "PRF_HMAC_SHA2_256", 6: "PRF_HMAC_SHA2_384", 7: "PRF_HMAC_SHA2_512"}
	dhNames  = map[uint16]string{2: "MODP_1024", 14: "MODP_2048", 15: "MODP_3072", 16: "MODP_4096", 19: "ECP_256",
		20: "ECP_384", 21: "ECP_521", 31: "CURVE_25519", 32: "CURVE_448", 35: "ML_KEM_512", 36: "ML_KEM_768", 37: "ML_KEM_1024"}
)

func charonName(names map[uint16]string, id uint16) string {
	if n, ok := names[id]; ok {
		return n
	}
	return strconv.Itoa(int(id))
}
